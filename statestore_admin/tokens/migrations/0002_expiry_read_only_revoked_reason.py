"""Tokens expire, may be read-only, and record why they were revoked.

Existing tokens, eternal until now, expire ``API_TOKEN_MAX_AGE_DAYS`` after their creation (some at once,
if older than that).
"""

from datetime import timedelta

from django.conf import settings
from django.db import migrations, models

import statestore_admin.tokens.models


def expire_existing_tokens(apps, schema_editor):
    ApiToken = apps.get_model("tokens", "ApiToken")
    max_age = timedelta(days=settings.API_TOKEN_MAX_AGE_DAYS)
    tokens = ApiToken.objects.using(schema_editor.connection.alias).filter(expires_at__isnull=True)
    for token in tokens.only("pk", "created_at").iterator():
        ApiToken.objects.using(schema_editor.connection.alias).filter(pk=token.pk).update(
            expires_at=token.created_at + max_age
        )


class Migration(migrations.Migration):
    dependencies = [
        ("tokens", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(expire_existing_tokens, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(default=statestore_admin.tokens.models.default_expiry),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="read_only",
            field=models.BooleanField(default=False, help_text="Safe methods (GET, HEAD, OPTIONS) only."),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked_reason",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
