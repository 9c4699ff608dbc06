"""Audit events of a new action: ``orphans``, a ``state_store_orphans --delete`` run (worker-side objects that
no row references, deleted; no keys)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("state", "0005_gcrun_actor"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("add", "add key"),
                    ("set", "set value"),
                    ("patch", "edit value"),
                    ("expiry", "set expiry"),
                    ("expire", "expire"),
                    ("delete", "delete"),
                    ("clear", "clear"),
                    ("restore", "restore"),
                    ("gc", "garbage collection"),
                    ("orphans", "delete orphans"),
                ],
                max_length=8,
            ),
        ),
    ]
