"""Audit events and keys record Airflow 3.4's ``region_id`` (NULL: outside any region, as every event
recorded on 3.3); a key's history index covers it, last, so that lookups naming only the 3.3 coordinates
still use it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("state", "0006_auditevent_orphans"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="auditkey",
            name="auditkey_task_idx",
        ),
        migrations.AddField(
            model_name="auditevent",
            name="region_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="auditkey",
            name="region_id",
            field=models.UUIDField(null=True),
        ),
        migrations.AddIndex(
            model_name="auditkey",
            index=models.Index(
                fields=["dag_id", "run_id", "task_id", "map_index", "key", "region_id"], name="auditkey_natural_idx"
            ),
        ),
    ]
