"""The dashboard's own records (default database)."""

from django.db import models


class GcRun(models.Model):
    """One real (not dry) run of ``state_store_clean``, written at its start and updated at its end."""

    class Outcome(models.TextChoices):
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        PARTIAL = "partial", "stopped at --max-batches"
        INTERRUPTED = "interrupted", "interrupted"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped (not the metastore backend)"
        LOCKED = "locked", "another run was in progress"

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)
    cutoff = models.DateTimeField()
    dag_ids = models.JSONField(default=list, blank=True)
    batch_size = models.PositiveIntegerField()
    rows_deleted = models.PositiveBigIntegerField(default=0)
    batches = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    message = models.TextField(blank=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["-started_at"], name="gcrun_started_idx")]

    def __str__(self) -> str:
        return f"GC {self.started_at:%Y-%m-%d %H:%M:%S} {self.outcome}: {self.rows_deleted} rows"

    @property
    def duration_seconds(self) -> float | None:
        return (self.finished_at - self.started_at).total_seconds() if self.finished_at else None
