"""Django admin's API tokens: every user's, listed for administrators, who may revoke them."""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy, ngettext

from statestore_admin.access import policies
from statestore_admin.access.actors import ADMIN, Actor
from statestore_admin.tokens import services
from statestore_admin.tokens.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Every user's tokens, for administrators: list and revoke. Tokens are created by their users only."""

    list_display = ("prefix", "user", "name", "created_at", "expires_at", "read_only", "last_used_at", "revoked_at")
    list_filter = ("revoked_at", "read_only", "user")
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = (
        "user",
        "prefix",
        "created_at",
        "expires_at",
        "read_only",
        "last_used_at",
        "revoked_at",
        "revoked_reason",
    )
    exclude = ("digest",)
    actions = ["revoke"]

    def has_view_permission(self, request, obj=None):
        return policies.may_administer_tokens(request.user, "view")

    def has_add_permission(self, request):
        return policies.may_administer_tokens(request.user, "add")

    def has_change_permission(self, request, obj=None):
        return policies.may_administer_tokens(request.user, "change")

    def has_delete_permission(self, request, obj=None):
        return policies.may_administer_tokens(request.user, "delete")

    @admin.action(description=gettext_lazy("Revoke the selected tokens"), permissions=["change"])
    def revoke(self, request, queryset):
        tokens = list(queryset.active())
        actor = Actor.from_request(request, via=ADMIN)
        for token in tokens:
            services.revoke(token, f"revoked by {request.user.get_username()}", actor=actor)
        message = ngettext("Revoked %(count)s token.", "Revoked %(count)s tokens.", len(tokens))
        self.message_user(request, message % {"count": len(tokens)}, messages.SUCCESS)
