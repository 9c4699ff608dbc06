"""A user's tokens are revoked when their password changes or they are deactivated (recorded in ``revoked_reason``
and in the audit trail, as the dashboard's rule: ``Actor.rule()``).

``pre_save`` compares with the stored row and notes the reason; ``post_save`` revokes, so a save that fails
revokes nothing.
"""

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from statestore_admin.access.actors import Actor
from statestore_admin.tokens import services
from statestore_admin.tokens.models import ApiToken

PASSWORD_CHANGED = "password changed"
USER_DEACTIVATED = "user deactivated"


@receiver(pre_save, sender=get_user_model(), dispatch_uid="tokens.note_revocation")
def note_revocation(sender, instance, raw=False, update_fields=None, **kwargs):
    instance._revoke_api_tokens = None
    if raw or instance._state.adding or instance.pk is None:
        return
    fields = set(update_fields) if update_fields is not None else None
    if fields is not None and not fields & {"password", "is_active"}:
        return  # e.g. login's last_login: no query
    if fields == {"password"} and getattr(instance, "_password", None) is None:
        return  # Django re-hashing the same password on login (a new hasher or more iterations)
    stored = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()
    if stored is None:
        return
    if stored["is_active"] and not instance.is_active:
        instance._revoke_api_tokens = USER_DEACTIVATED
    elif stored["password"] != instance.password:
        instance._revoke_api_tokens = PASSWORD_CHANGED


@receiver(post_save, sender=get_user_model(), dispatch_uid="tokens.revoke")
def revoke(sender, instance, raw=False, **kwargs):
    reason = getattr(instance, "_revoke_api_tokens", None)
    if reason and not raw:
        for token in ApiToken.objects.filter(user=instance).active().select_related("user"):
            services.revoke(token, reason, actor=Actor.rule())  # audited: the rule, and its reason
        instance._revoke_api_tokens = None
