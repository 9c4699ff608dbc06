"""The dashboard's own records (default database): GC runs and the audit trail."""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from statestore_admin.core.patterns import validate_pattern


class GcRun(models.Model):
    """One real (not dry) run of ``state_store_clean``, written at its start and updated at its end."""

    class Outcome(models.TextChoices):
        RUNNING = "running", gettext_lazy("running")
        COMPLETED = "completed", gettext_lazy("completed")
        PARTIAL = "partial", gettext_lazy("stopped at its batch or time limit")
        INTERRUPTED = "interrupted", gettext_lazy("interrupted")
        FAILED = "failed", gettext_lazy("failed")
        SKIPPED = "skipped", gettext_lazy("skipped (not the metastore backend)")
        LOCKED = "locked", gettext_lazy("another run was in progress")

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
    # Who ran it (``Actor.name``): the OS user@host of the command, or the dashboard user; and through which
    # face (``Actor.via``: gc for the command, ui for the GC page). Empty for runs recorded before.
    actor = models.CharField(max_length=255, blank=True)
    via = models.CharField(max_length=8, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["-started_at"], name="gcrun_started_idx")]
        verbose_name, verbose_name_plural = gettext_lazy("GC run"), gettext_lazy("GC runs")  # Django admin's names

    def __str__(self) -> str:
        return f"GC {self.started_at:%Y-%m-%d %H:%M:%S} {self.outcome}: {self.rows_deleted} rows"

    @property
    def duration_seconds(self) -> float | None:
        return (self.finished_at - self.started_at).total_seconds() if self.finished_at else None


class AuditEvent(models.Model):
    """One change to the state store, by whom and through which face; its keys are ``AuditKey`` rows.

    Written *pending* before the change reaches Airflow's database and confirmed (*done*) after Airflow's
    transaction committed, so that no change exists without its event. A pending event older than
    ``PENDING_GRACE`` means the process stopped between the two steps: its outcome is unknown.
    """

    PENDING_GRACE = timedelta(minutes=1)

    class Status(models.TextChoices):
        PENDING = "pending", gettext_lazy("in progress")
        DONE = "done", gettext_lazy("done")
        FAILED = "failed", gettext_lazy("failed (nothing changed)")

    class Action(models.TextChoices):
        ADD = "add", gettext_lazy("add key")
        SET = "set", gettext_lazy("set value")
        PATCH = "patch", gettext_lazy("edit value")
        EXPIRY = "expiry", gettext_lazy("set expiry")
        EXPIRE = "expire", gettext_lazy("expire")
        DELETE = "delete", gettext_lazy("delete")
        CLEAR = "clear", gettext_lazy("clear")
        RESTORE = "restore", gettext_lazy("restore")
        GC = "gc", gettext_lazy("garbage collection")
        ORPHANS = "orphans", gettext_lazy("delete orphans")
        PRUNE = "prune", gettext_lazy("prune audit trail")
        TOKEN = "token", gettext_lazy("issue API token")
        REVOKE = "revoke", gettext_lazy("revoke API token")
        GRANT = "grant", gettext_lazy("grant access scope")
        UNGRANT = "ungrant", gettext_lazy("revoke access scope")

    # Events of no store that only those who view both stores see (audit.trail), and the actions with no keys
    BOTH_STORES = (Action.ORPHANS, Action.PRUNE, Action.TOKEN, Action.REVOKE, Action.GRANT, Action.UNGRANT)
    KEYLESS = (Action.GC, *BOTH_STORES)

    class Via(models.TextChoices):
        UI = "ui", gettext_lazy("dashboard")
        API = "api", gettext_lazy("API")
        ADMIN = "admin", gettext_lazy("Django admin")
        COMMAND = "command", gettext_lazy("command")
        GC = "gc", gettext_lazy("GC")
        RULE = "rule", gettext_lazy("automatic rule")

    at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    # Who
    actor = models.CharField(max_length=255, help_text=gettext_lazy("User name, or OS user@host for commands."))
    user = models.ForeignKey(  # not indexed: the trail is searched by actor name, users are rarely deleted
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    token_id = models.BigIntegerField(null=True, blank=True)
    token_name = models.CharField(max_length=100, blank=True)
    signed_in = models.CharField(
        max_length=200,
        blank=True,
        help_text=gettext_lazy("How the user's session signed in: password, single sign-on (provider), …"),
    )
    os_user = models.CharField(max_length=150, blank=True)
    host = models.CharField(
        max_length=255, blank=True, help_text=gettext_lazy("Client address, or the command's host.")
    )
    via = models.CharField(max_length=8, choices=Via.choices)
    # What
    action = models.CharField(max_length=8, choices=Action.choices)
    store = models.CharField(max_length=8, blank=True, help_text=gettext_lazy("task or asset; empty for GC."))
    dag_id = models.CharField(max_length=250, null=True, blank=True)
    run_id = models.CharField(max_length=250, null=True, blank=True)
    task_id = models.CharField(max_length=250, null=True, blank=True)
    map_index = models.IntegerField(null=True, blank=True)
    # Airflow 3.4's dynamic region of the task instance acted on; NULL outside any region (every event
    # recorded on 3.3, where there are none). ``map_index`` is then the index inside that region.
    region_id = models.UUIDField(null=True, blank=True)
    asset_id = models.IntegerField(null=True, blank=True)
    asset_name = models.CharField(max_length=1500, blank=True)
    asset_uri = models.CharField(max_length=1500, blank=True)
    key_count = models.PositiveIntegerField(default=0)
    details = models.JSONField(default=dict, blank=True)
    restored_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="restorations"
    )

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["at"], name="audit_at_idx"),
            models.Index(fields=["actor", "id"], name="audit_actor_idx"),
            models.Index(fields=["dag_id", "run_id", "task_id"], name="audit_scope_idx"),
            models.Index(fields=["asset_id"], name="audit_asset_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.actor} {self.action} {self.key_count} key(s) via {self.via}"

    @property
    def visible_store(self) -> str:
        """The store whose viewers may see this event (GC runs clean task state)."""
        return self.store or "task"

    @property
    def viewed_with(self) -> tuple[str, ...]:
        """The stores a user must view to see this event: an orphans run's objects are of both stores, and so
        are the trail a prune deletes and the access an API token or an access scope gives."""
        return ("task", "asset") if self.action in self.BOTH_STORES else (self.visible_store,)

    @property
    def restorable(self) -> bool:
        """GC follows Airflow's rules, deleted orphans had no row, a pruned event, an issued or revoked token, a
        granted or revoked scope are no keys, and a failed change changed nothing: none can be restored."""
        return self.action not in self.KEYLESS and self.status != self.Status.FAILED

    @property
    def outcome(self) -> str:
        """done, failed, pending, or unknown (pending for longer than the grace period)."""
        if self.status == self.Status.PENDING and timezone.now() - self.at > self.PENDING_GRACE:
            return "unknown"
        return self.status


class AuditKey(models.Model):
    """One key of an event: its coordinates, and its value and expiry before and after (NULL value = no row).

    A task key's coordinates are Airflow's natural key: (dag_id, run_id, task_id, region_id, map_index, key),
    ``region_id`` NULL outside any region (always on 3.3; Airflow 3.4's migration keeps such rows at its
    all-zero sentinel region, with ``map_index`` renamed ``region_index``, so the same key)."""

    event = models.ForeignKey(AuditEvent, on_delete=models.CASCADE, related_name="keys")
    dag_id = models.CharField(max_length=250, null=True)
    run_id = models.CharField(max_length=250, null=True)
    task_id = models.CharField(max_length=250, null=True)
    map_index = models.IntegerField(null=True)
    region_id = models.UUIDField(null=True)
    asset_id = models.IntegerField(null=True)
    key = models.CharField(max_length=512)
    before_value = models.TextField(null=True)
    before_expires_at = models.DateTimeField(null=True)
    after_value = models.TextField(null=True)
    after_expires_at = models.DateTimeField(null=True)
    # Who wrote the key before the change, and when: its ``updated_at`` and, for an asset key, Airflow's
    # ``last_updated_by_*`` columns ({column: value}, UUIDs as text; ``audit.events.provenance``). A restore
    # puts them back; NULL where no row existed, and in events recorded before they were kept.
    before_updated_at = models.DateTimeField(null=True)
    before_writer = models.JSONField(null=True)
    truncated = models.BooleanField(
        default=False, help_text=gettext_lazy("A value was longer than max_value_storage_bytes and is kept truncated.")
    )
    # The task key row's id when the change was made: a link to a key by its id outlives the row (a restore
    # inserts a new row with a new id), through this to the natural key (``selectors.successor_task_key``).
    row_id = models.BigIntegerField(null=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # A key's history by its natural key; region_id last, so that lookups without it use it too.
            models.Index(
                fields=["dag_id", "run_id", "task_id", "map_index", "key", "region_id"], name="auditkey_natural_idx"
            ),
            models.Index(fields=["asset_id", "key"], name="auditkey_asset_idx"),
            models.Index(fields=["key"], name="auditkey_key_idx"),
            models.Index(fields=["row_id"], name="auditkey_row_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.key} (event {self.event_id})"


class AccessScope(models.Model):
    """One grant to a group or a user (``access.scopes``): a glob pattern of DAG ids, or of asset names and URIs;
    or every DAG and asset (``ALL``, pattern ``*``: unscoped, chosen by an administrator).

    A user sees what the grants of their own and of their groups allow, and nothing without any grant (an account
    that single sign-on manages: ``DEFAULT_SCOPE``).
    """

    class Kind(models.TextChoices):
        DAG = "dag", gettext_lazy("DAG ids")
        ASSET = "asset", gettext_lazy("asset names or URIs")
        ALL = "all", gettext_lazy("every DAG and asset (unscoped)")

    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="statestore_scopes"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="statestore_scopes"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    pattern = models.CharField(
        max_length=250,
        help_text=gettext_lazy(
            "A glob: * any characters, ? one character, e.g. etl_* or s3://team-bucket/*. For every DAG and asset: *."
        ),
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["kind", "pattern"]
        verbose_name = gettext_lazy("access scope")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(group__isnull=False, user__isnull=True)
                | models.Q(group__isnull=True, user__isnull=False),
                name="accessscope_one_holder",
                violation_error_message=gettext_lazy("A scope belongs to either a group or a user."),
            ),
            models.UniqueConstraint(
                fields=["group", "kind", "pattern"],
                condition=models.Q(group__isnull=False),
                name="accessscope_group_uniq",
            ),
            models.UniqueConstraint(
                fields=["user", "kind", "pattern"], condition=models.Q(user__isnull=False), name="accessscope_user_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.holder}: {self.get_kind_display()} {self.pattern}"

    @property
    def holder(self) -> str:
        return f"group {self.group}" if self.group_id else f"user {self.user}"

    def clean(self):
        from django.core.exceptions import ValidationError

        if self.kind == self.Kind.ALL and self.pattern != "*":
            raise ValidationError({"pattern": gettext("Every DAG and asset is granted with the pattern *.")})
        self._refuse_mixing_with_every_dag_and_asset()
        try:
            validate_pattern(self.pattern)
        except ValidationError as exc:
            raise ValidationError({"pattern": exc.messages}) from None

    def _refuse_mixing_with_every_dag_and_asset(self):
        """A holder's own grants are patterns or every DAG and asset, as ``grants.grant`` keeps them: a pattern added
        beside every DAG and asset would restrict nothing (the union is everything), which is not what its author
        meant."""
        from django.core.exceptions import ValidationError

        if not (self.group_id or self.user_id):
            return
        others = AccessScope.objects.filter(group_id=self.group_id, user_id=self.user_id).exclude(pk=self.pk)
        if self.kind == self.Kind.ALL and others.exclude(kind=self.Kind.ALL).exists():
            raise ValidationError(
                {"kind": gettext("This holder has patterns: delete them first to grant every DAG and asset instead.")}
            )
        if self.kind != self.Kind.ALL and others.filter(kind=self.Kind.ALL).exists():
            raise ValidationError(
                {
                    "kind": gettext(
                        "This holder is granted every DAG and asset: delete that first to restrict it to patterns."
                    )
                }
            )


class ExternalIdentity(models.Model):
    """A dashboard user as an identity provider or authenticating proxy knows them (``identity.sign_in``):
    found again by (method, provider, subject) at every sign-in, with the groups it last sent."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities")
    method = models.CharField(max_length=16)
    provider = models.CharField(max_length=200, blank=True)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(
        default=list, blank=True, help_text=gettext_lazy("The provider's groups at the last sign-in.")
    )
    first_sign_in = models.DateTimeField(default=timezone.now)
    last_sign_in = models.DateTimeField(default=timezone.now)
    # Who signed in is the row's user; the client address the last sign-in came from is kept here, not in the
    # audit trail: a sign-in changes no state, and one event per sign-in would bury the changes.
    last_sign_in_from = models.CharField(max_length=255, blank=True)

    class Meta:
        verbose_name = gettext_lazy("external identity")
        verbose_name_plural = gettext_lazy("external identities")
        constraints = [
            models.UniqueConstraint(fields=["method", "provider", "subject"], name="externalidentity_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} ({self.method} {self.provider})".replace(" )", ")")


class BreakGlassLink(models.Model):
    """A one-time sign-in link for a superuser, made by ``manage.py break_glass`` for when single sign-on is down
    or local passwords are off. Only a hash of its random token is kept: the database never holds a usable link."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="break_glass_links")
    token_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    used = models.DateTimeField(null=True, blank=True)
    # Who made the link (the OS user@host running ``manage.py break_glass``): the link is its own record
    # (identity sits below the audit trail), also logged at WARNING.
    issued_by = models.CharField(max_length=255, blank=True)

    class Meta:
        verbose_name = gettext_lazy("break-glass link")

    def __str__(self) -> str:
        return f"break-glass link for {self.user} until {self.expires:%Y-%m-%d %H:%M}"


class StatsSnapshot(models.Model):
    """Exact figures of the state store at one time, taken by ``state_store_stats`` (and at the end of
    ``state_store_clean``) in one bounded pass; pages show them with their age where exactness would cost a
    scan. Per-DAG figures are ``StatsSnapshotDag`` rows; the rest are columns and small JSON lists here.

    JSON shapes (lists, in order):
    - ``expiry_histogram``: ``[{"day": "YYYY-MM-DD", "keys": n, "bytes": n}]``, the next 30 days (UTC), by
      the day keys expire (what GC will delete then);
    - ``size_histogram``: ``[{"store": "task"|"asset", "up_to": bytes or null (larger), "keys": n}]``;
    - ``largest``: the 50 largest values, ``[{"store", "key", "size", "key_id", "dag_id", "run_id",
      "task_id", "map_index", "asset_id", "asset_name", "asset_uri"}]`` (task fields None for asset keys and
      the reverse);
    - ``top_tasks``: ``[{"dag_id", "task_id", "keys", "bytes"}]``, the 50 first by keys and by bytes;
    - ``top_assets``: ``[{"asset_id", "name", "uri", "keys", "bytes"}]``, the 50 first by keys and by bytes.
    """

    class Status(models.TextChoices):
        RUNNING = "running", gettext_lazy("running")
        DONE = "done", gettext_lazy("done")
        FAILED = "failed", gettext_lazy("failed")

    taken_at = models.DateTimeField(
        default=timezone.now, help_text=gettext_lazy("When the pass started; figures are as of then.")
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    trigger = models.CharField(
        max_length=16, default="command", help_text=gettext_lazy("command, or gc (after state_store_clean)")
    )
    # Who took it (a user's name, or OS user@host for commands): a snapshot changes no state, so it is its own
    # record rather than an audit event.
    actor = models.CharField(max_length=255, blank=True)
    # Task state
    task_keys = models.BigIntegerField(default=0)
    task_bytes = models.BigIntegerField(default=0)
    expired = models.BigIntegerField(default=0)
    expiring = models.BigIntegerField(default=0, help_text=gettext_lazy("Expiring within 24 h of taken_at."))
    never = models.BigIntegerField(default=0)
    live = models.BigIntegerField(
        default=0, help_text=gettext_lazy("Not expired (expiring ones and never-expiring ones included).")
    )
    dags = models.IntegerField(default=0)
    # Asset state
    asset_keys = models.BigIntegerField(default=0)
    asset_bytes = models.BigIntegerField(default=0)
    assets = models.IntegerField(default=0, help_text=gettext_lazy("Assets that have state."))
    # Distributions
    expiry_histogram = models.JSONField(default=list, blank=True)
    size_histogram = models.JSONField(default=list, blank=True)
    largest = models.JSONField(default=list, blank=True)
    top_tasks = models.JSONField(default=list, blank=True)
    top_assets = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-taken_at"]
        indexes = [models.Index(fields=["status", "-taken_at"], name="statssnap_status_taken_idx")]
        verbose_name, verbose_name_plural = gettext_lazy("statistics snapshot"), gettext_lazy("statistics snapshots")

    def __str__(self) -> str:
        return f"Snapshot {self.taken_at:%Y-%m-%d %H:%M:%S} {self.status}: {self.task_keys} task keys"

    @property
    def duration_seconds(self) -> float | None:
        return (self.finished_at - self.taken_at).total_seconds() if self.finished_at else None


class StatsSnapshotDag(models.Model):
    """One DAG's task state in a snapshot (every DAG with state has a row)."""

    snapshot = models.ForeignKey(StatsSnapshot, on_delete=models.CASCADE, related_name="dag_rows")
    dag_id = models.CharField(max_length=250)
    keys = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    expired = models.BigIntegerField(default=0)
    expiring = models.BigIntegerField(default=0)
    never = models.BigIntegerField(default=0)
    runs = models.IntegerField(default=0, help_text=gettext_lazy("DAG runs with state."))
    last_updated = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["dag_id"]
        constraints = [models.UniqueConstraint(fields=["snapshot", "dag_id"], name="statssnapdag_uniq")]
        indexes = [
            models.Index(fields=["dag_id", "snapshot"], name="statssnapdag_dag_idx"),
            models.Index(fields=["snapshot", "-keys"], name="statssnapdag_keys_idx"),
            models.Index(fields=["snapshot", "-bytes"], name="statssnapdag_bytes_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id}: {self.keys} keys (snapshot {self.snapshot_id})"


class CacheEntry(models.Model):
    """A row of Django's database cache (``statestore_admin/cache.py``), the cache every worker of every server
    shares by default. Django reads and writes it with SQL of its own; the model exists so that ``migrate``
    creates the table (the columns ``createcachetable`` would) and a test database's flush empties it."""

    cache_key = models.CharField(max_length=255, primary_key=True)
    value = models.TextField()
    expires = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "statestore_cache"
        verbose_name, verbose_name_plural = gettext_lazy("cache entry"), gettext_lazy("cache entries")
        default_permissions = ()  # nobody is granted anything on the cache: no permissions to list in roles


class AccountPreferences(models.Model):
    """What an account chose for itself (``identity.preferences``): the language of its pages, kept with the
    account so that it follows the person to another browser (a cookie keeps it for the sign-in page)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="preferences"
    )
    # A code of settings.LANGUAGES, or "" for the browser's language (Accept-Language).
    language = models.CharField(max_length=16, blank=True)

    class Meta:
        verbose_name = "account preferences"
        verbose_name_plural = "account preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class ObjectSize(models.Model):
    """The size of a worker-side object (``objects.sizes``) as the dashboard last saw it: when it read the object
    for a key page or the API's ``resolve=true``, or wrote it (the demo's data). The row in Airflow's database
    holds only the object's reference, so what a key costs is that row plus this object; an object never read
    has no row here and its size is unknown (never 0). Keyed by the reference (its SHA-256: a reference may be
    longer than an index allows); the key it was seen under (``store`` and its coordinates) lets the largest
    values find its row without scanning Airflow's tables. Forgotten when the dashboard deletes the object or
    finds it missing."""

    ref_hash = models.CharField(max_length=64, unique=True)
    ref = models.TextField()
    size = models.BigIntegerField(help_text=gettext_lazy("Bytes in the worker-side storage (compressed, as stored)."))
    seen_at = models.DateTimeField(default=timezone.now)
    store = models.CharField(max_length=8, help_text=gettext_lazy("task or asset"))
    dag_id = models.CharField(max_length=250, null=True, blank=True)
    run_id = models.CharField(max_length=250, null=True, blank=True)
    task_id = models.CharField(max_length=250, null=True, blank=True)
    map_index = models.IntegerField(null=True, blank=True)
    asset_id = models.IntegerField(null=True, blank=True)
    key = models.CharField(max_length=512)

    class Meta:
        indexes = [models.Index(fields=["-size"], name="objectsize_size_idx")]
        verbose_name = gettext_lazy("worker-side object size")

    def __str__(self) -> str:
        return f"{self.ref}: {self.size} bytes"
