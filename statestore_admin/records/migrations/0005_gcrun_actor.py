"""GC runs record who ran them (the OS user@host of the command, or the dashboard user) and through which
face; a run may also stop at a time limit (the GC page), so "partial" says "its batch or time limit"."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("state", "0004_stats_snapshots"),
    ]

    operations = [
        migrations.AddField(
            model_name="gcrun",
            name="actor",
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name="gcrun",
            name="via",
            field=models.CharField(blank=True, max_length=8),
        ),
        migrations.AlterField(
            model_name="gcrun",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("running", "running"),
                    ("completed", "completed"),
                    ("partial", "stopped at its batch or time limit"),
                    ("interrupted", "interrupted"),
                    ("failed", "failed"),
                    ("skipped", "skipped (not the metastore backend)"),
                    ("locked", "another run was in progress"),
                ],
                default="running",
                max_length=16,
            ),
        ),
    ]
