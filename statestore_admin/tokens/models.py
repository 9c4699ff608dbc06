"""API tokens: ``Authorization: Bearer <token>``. Only a SHA-256 digest is stored; the token is shown once."""

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

PREFIX_LENGTH = 12


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=PREFIX_LENGTH, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        db_table = "api_apitoken"  # the table of the API app, where tokens lived before they had an app of their own
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.name or 'unnamed'})"

    @classmethod
    def issue(cls, user, name: str = "") -> tuple["ApiToken", str]:
        """A new token for ``user``: the record and the token itself (not stored, shown once)."""
        token = "ssa_" + secrets.token_urlsafe(32)
        record = cls.objects.create(user=user, name=name[:100], prefix=token[:PREFIX_LENGTH], digest=digest(token))
        return record, token

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
