"""ApiToken moves here from the API app: state only, its table (``api_apitoken``) and rows stay as they are.

The content type ``api.apitoken`` becomes ``tokens.apitoken``, so that the permissions given to users and
groups (and the admin's log) keep pointing at the model. ``api.0002_move_apitoken_to_tokens`` then
removes the model from the API app's state.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def _rename_content_type(apps, schema_editor, old_app_label, new_app_label):
    ContentType = apps.get_model("contenttypes", "ContentType")
    content_types = ContentType.objects.db_manager(schema_editor.connection.alias)
    if content_types.filter(app_label=new_app_label, model="apitoken").exists():
        return  # already there (post_migrate created it): leave both alone rather than clash
    content_types.filter(app_label=old_app_label, model="apitoken").update(app_label=new_app_label)
    ContentType.objects.clear_cache()


def api_to_tokens(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "api", "tokens")


def tokens_to_api(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "tokens", "api")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("api", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(blank=True, max_length=100)),
                        (
                            "prefix",
                            models.CharField(help_text="The token's first characters, to recognise it.", max_length=12),
                        ),
                        ("digest", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "api_apitoken",
                        "ordering": ["-created_at"],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(api_to_tokens, tokens_to_api),
    ]
