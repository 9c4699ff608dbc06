"""API tokens: ``Authorization: Bearer <token>``. Only a SHA-256 digest is stored; the token is shown once.

The faces issue and revoke through ``tokens.services``, which audits who did it.
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, models, router
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from statestore_admin.core import plain

PREFIX_LENGTH = 12


def max_age() -> timedelta:
    """The longest a token may live (``API_TOKEN_MAX_AGE_DAYS``), also the default."""
    return timedelta(days=settings.API_TOKEN_MAX_AGE_DAYS)


def default_expiry():
    return timezone.now() + max_age()


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        """Not revoked (expired ones included: they are listed and can still be revoked)."""
        return self.filter(revoked_at__isnull=True)


def presented(token_digest: str) -> "ApiToken | None":
    """The active token (not revoked; expired or not) with this digest, its user loaded with it: what
    ``ApiToken.objects.active().select_related("user").filter(digest=...).first()`` gives, in one plain
    statement, which every API request with a token makes (``core.plain``)."""
    user_model = get_user_model()
    connection = connections[router.db_for_read(ApiToken)]
    quote = connection.ops.quote_name
    sql = (
        f"SELECT {plain.columns(ApiToken, connection, 't')}, {plain.columns(user_model, connection, 'u')} "
        f"FROM {quote(ApiToken._meta.db_table)} t "
        f"INNER JOIN {quote(user_model._meta.db_table)} u ON u.{quote(user_model._meta.pk.column)} = t.user_id "
        "WHERE t.digest = %s AND t.revoked_at IS NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [token_digest])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(ApiToken._meta.concrete_fields)
    record = plain.instance(ApiToken, connection, row[:split])
    record.user = plain.instance(user_model, connection, row[split:])
    return record


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(
        max_length=PREFIX_LENGTH, help_text=gettext_lazy("The token's first characters, to recognise it.")
    )
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(default=default_expiry)
    read_only = models.BooleanField(default=False, help_text=gettext_lazy("Safe methods (GET, HEAD, OPTIONS) only."))
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=200, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        db_table = "api_apitoken"  # the table of the API app, where tokens lived before they had an app of their own
        ordering = ["-created_at"]
        verbose_name, verbose_name_plural = (
            gettext_lazy("API token"),
            gettext_lazy("API tokens"),
        )  # Django admin's names

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.name or 'unnamed'})"

    @classmethod
    def issue(
        cls, user, name: str = "", expires_in: timedelta | None = None, read_only: bool = False
    ) -> tuple["ApiToken", str]:
        """A new token for ``user``: the record and the token itself (not stored, shown once).

        ``expires_in`` defaults to, and may not exceed, ``API_TOKEN_MAX_AGE_DAYS``."""
        if expires_in is None:
            expires_in = max_age()
        if expires_in <= timedelta(0) or expires_in > max_age():
            message = _("A token expires after at most %(days)s days.")
            raise ValueError(message % {"days": settings.API_TOKEN_MAX_AGE_DAYS})
        token = "ssa_" + secrets.token_urlsafe(32)
        now = timezone.now()
        record = cls.objects.create(
            user=user,
            name=name[:100],
            prefix=token[:PREFIX_LENGTH],
            digest=digest(token),
            created_at=now,
            expires_at=now + expires_in,
            read_only=read_only,
        )
        return record, token

    @property
    def expired(self) -> bool:
        return self.expires_at <= timezone.now()

    def revoke(self, reason: str = "") -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.revoked_reason = reason[:200]
            self.save(update_fields=["revoked_at", "revoked_reason"])
