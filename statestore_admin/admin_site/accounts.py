"""Django admin's accounts and access scopes: the scope patterns (superusers only), and Django's own user
and group admins registered again with those patterns inline and a guard that keeps a scoped user from
widening their own scope. Grants are added, changed and deleted through ``grants`` as the admin's user, so
each is audited and refused as ``grant_scope`` refuses it."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from statestore_admin import grants
from statestore_admin.access.actors import ADMIN, Actor
from statestore_admin.access.policies import locked_account_fields, may_change_accounts, may_manage_scopes
from statestore_admin.access.scopes import rule_for
from statestore_admin.core import formatting
from statestore_admin.identity import sign_in
from statestore_admin.identity.sign_in import GroupMapping
from statestore_admin.records.models import AccessScope, ExternalIdentity


class ScopeManagersOnly:
    """Scopes are for superusers only (``policies.may_manage_scopes``), whatever the user's permissions."""

    def has_view_permission(self, request, obj=None):
        return may_manage_scopes(request.user)

    def has_add_permission(self, request, *args):
        return may_manage_scopes(request.user)

    def has_change_permission(self, request, obj=None):
        return may_manage_scopes(request.user)

    def has_delete_permission(self, request, obj=None):
        return may_manage_scopes(request.user)


@admin.register(AccessScope)
class AccessScopeAdmin(ScopeManagersOnly, admin.ModelAdmin):
    """Every pattern of every group and user; also editable on each group's and user's page."""

    list_display = ("__str__", "group", "user", "kind", "pattern", "created_at")
    list_filter = ("kind", "group")
    search_fields = ("pattern", "group__name", "user__username")
    autocomplete_fields = ("group", "user")
    readonly_fields = ("created_at",)  # set when granted, not typed in

    def save_model(self, request, obj, form, change):
        if change and not form.has_changed():
            return
        actor = Actor.from_request(request, via=ADMIN)
        if change:  # the row as it was: another pattern, or another holder's
            _revoke_row(AccessScope.objects.get(pk=obj.pk), actor)
        granted = _grant_row(obj, actor)
        obj.pk, obj.created_at = granted.pk, granted.created_at  # the admin links to the row granted

    def delete_model(self, request, obj):
        _revoke_row(obj, Actor.from_request(request, via=ADMIN))

    def delete_queryset(self, request, queryset):
        actor = Actor.from_request(request, via=ADMIN)
        for row in queryset.select_related("group", "user"):
            _revoke_row(row, actor)


def _pattern_of(row: AccessScope) -> dict:
    """A row as ``grants.grant``'s and ``grants.revoke``'s arguments."""
    if row.kind == AccessScope.Kind.ALL:
        return {"unscoped": True}
    return {"dags" if row.kind == AccessScope.Kind.DAG else "assets": [row.pattern]}


def _grant_row(row: AccessScope, actor: Actor) -> AccessScope:
    holder = row.group or row.user
    grants.grant(holder, **_pattern_of(row), actor=actor)
    return AccessScope.objects.get(group=row.group, user=row.user, kind=row.kind, pattern=row.pattern)


def _revoke_row(row: AccessScope, actor: Actor) -> None:
    grants.revoke(row.group or row.user, **_pattern_of(row), actor=actor)


class OneKindOfGrant(BaseInlineFormSet):
    """A holder's own grants are patterns or every DAG and asset, not both, as ``grant_scope`` refuses them:
    each row's own check (``AccessScope.clean``) sees only the rows saved already, not those added beside it."""

    def clean(self):
        super().clean()
        kept = [form.cleaned_data for form in self.forms if form.cleaned_data and not form.cleaned_data.get("DELETE")]
        kinds = {data.get("kind") for data in kept} - {None}
        if AccessScope.Kind.ALL in kinds and len(kinds) > 1:
            raise ValidationError(
                gettext(
                    "Give either patterns or every DAG and asset (unscoped), not both: patterns beside every DAG and "
                    "asset would restrict nothing."
                )
            )


class AccessScopeInline(ScopeManagersOnly, admin.TabularInline):
    model = AccessScope
    formset = OneKindOfGrant
    fields = ("kind", "pattern")
    extra = 1
    verbose_name_plural = _(
        "State store scope: DAG id and asset name/URI patterns, or every DAG and asset (unscoped, pattern *). "
        "A user sees what their own and their groups' grants allow; without any grant, nothing (an account that "
        "single sign-on manages: DEFAULT_SCOPE). DAG patterns only: no asset."
    )


class AccountsGuard:
    """Users and groups, as Django's admin has them, but no way to widen one's own scope through them: a
    user with a scope changes no account (``policies.may_change_accounts``), and some fields are locked
    (``policies.locked_account_fields``: superuser status, one's own groups and permissions). Their scope
    rows inline are granted and revoked as the admin's user."""

    def has_add_permission(self, request):
        return super().has_add_permission(request) and may_change_accounts(request.user)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and may_change_accounts(request.user)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and may_change_accounts(request.user)

    def get_readonly_fields(self, request, obj=None):
        locked = locked_account_fields(request.user, obj) if self.model is get_user_model() else ()
        return (*super().get_readonly_fields(request, obj), *locked)

    def save_formset(self, request, form, formset, change):
        """The scope rows inline are granted and revoked through ``grants``, the others saved as Django does."""
        if formset.model is not AccessScope:
            return super().save_formset(request, form, formset, change)
        formset.save(commit=False)  # what the form changed, for the admin's history; nothing saved yet
        actor = Actor.from_request(request, via=ADMIN)
        for row in formset.deleted_objects:
            _revoke_row(row, actor)
        for row, _fields in formset.changed_objects:
            _revoke_row(AccessScope.objects.get(pk=row.pk), actor)
            _grant_row(row, actor)
        for row in formset.new_objects:
            _grant_row(row, actor)


class ExternalIdentityInline(admin.TabularInline):
    """How the user signs in from outside, the groups the provider last sent and what they map to: set at
    every sign-in (``identity.sign_in``), so read-only here; a change made by hand would be undone by the next."""

    model = ExternalIdentity
    fields = ("method", "provider", "subject", "provider_groups", "mapped_to", "last_sign_in")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("Sign-in through single sign-on or the authenticating proxy")

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description=_("groups at the last sign-in"))
    def provider_groups(self, identity):
        return ", ".join(identity.groups) or gettext("none")

    @admin.display(description=_("mapped to"))
    def mapped_to(self, identity):
        granted, superuser = GroupMapping.from_settings().grants(identity.groups)
        names = sorted(granted) + (["superuser"] if superuser else [])
        return ", ".join(names) or gettext("nothing (no mapped group: no access)")


class UsersWithGroups(UserAdmin):
    """The user list shows each user's groups (roles and scope groups, set at sign-in for single sign-on); the
    user's page says which scope rule applies to them (``scopes.rule_for``)."""

    list_display = (*UserAdmin.list_display, "group_names")

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        return (*fieldsets, (_("State store access"), {"fields": ("scope_rule", "signs_in_until")}))

    def get_readonly_fields(self, request, obj=None):
        extra = ("scope_rule", "signs_in_until") if obj is not None else ()
        return (*super().get_readonly_fields(request, obj), *extra)

    @admin.display(description=_("scope rule"))
    def scope_rule(self, user):
        return rule_for(user)

    @admin.display(description=_("tokens and single sign-on sessions"))
    def signs_in_until(self, user):
        last = sign_in.last_sign_in(user)
        if last is None:
            return _("Local account: its API tokens work until they expire or are revoked.")
        until = formatting.iso(last + sign_in.max_age())
        return _(
            "Managed by single sign-on or the proxy: its API tokens and single sign-on sessions work until %(until)s "
            "(TOKEN_IDP_MAX_AGE after its last sign-in there), and again after its next sign-in."
        ) % {"until": until}

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description=_("groups"))
    def group_names(self, user):
        return ", ".join(sorted(group.name for group in user.groups.all())) or "—"


def _with_scopes(model, model_admin_class, *inlines):
    """Re-register ``model``'s admin with the scope patterns inline and the guard above."""
    admin.site.unregister(model)
    admin.site.register(
        model,
        type(
            model_admin_class.__name__,
            (AccountsGuard, model_admin_class),
            {"inlines": [*model_admin_class.inlines, *inlines, AccessScopeInline]},
        ),
    )


_with_scopes(Group, GroupAdmin)
_with_scopes(get_user_model(), UsersWithGroups, ExternalIdentityInline)
