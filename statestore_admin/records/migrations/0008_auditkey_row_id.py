"""Audit keys record the task key row's id, so that a link to a key by its id finds the key again after a
restore has brought it back as a new row (``selectors.successor_task_key``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("state", "0007_audit_region_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditkey",
            name="row_id",
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddIndex(
            model_name="auditkey",
            index=models.Index(fields=["row_id"], name="auditkey_row_idx"),
        ),
    ]
