"""Django settings, read from the environment (django-environ). Safe by default.

The dashboard has two databases:
- ``default``: its own (users, sessions, audit), ``DATABASE_URL``; default a SQLite file in ``var/``.
- ``airflow``: the Airflow metadata database holding the state tables, resolved by
  ``statestore_admin.airflow.dburl.resolve_airflow_database``; default the embedded demo SQLite file.

``STATESTORE_DEMO=1`` (set by ``make run``) forces both embedded databases, whatever ``DATABASE_URL``
or Airflow's own configuration say. The demo's files (both databases, its password, its secret key, its
objects) live in ``var/demo/``, apart from the embedded dashboard database of a dashboard on a real Airflow
database (``var/dashboard.sqlite3``): a deployment never inherits the demo's accounts (statestore.E050).

``SECRET_KEY`` must be set whenever ``DATABASE_URL`` is (a shared, production deployment). With the
embedded dashboard database a random key is generated once into ``secret_key`` beside it.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from statestore_admin.airflow.config import OBJECT_STORAGE_BACKEND
from statestore_admin.airflow.dburl import NO_DATABASE, SQLITE_OPTIONS, resolve_airflow_database, with_timeouts
from statestore_admin.framing import frame_origin, framing_settings

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

VAR_DIR = Path(env.str("STATESTORE_VAR_DIR", default=str(BASE_DIR / "var")))
DEMO = env.bool("STATESTORE_DEMO", default=False)
DEMO_DIR = VAR_DIR / "demo"
EMBEDDED_DASHBOARD_DB = DEMO or "DATABASE_URL" not in os.environ

# The Airflow metadata database (statestore_admin/airflow/dburl.py); the demo's when nothing else is configured.
AIRFLOW_DB_ALIAS = "airflow"
if DEMO:  # the demo's worker-side objects live in var/demo/state/, like a worker's common.io backend writes them
    os.environ.setdefault("AIRFLOW__WORKERS__STATE_STORE_BACKEND", OBJECT_STORAGE_BACKEND)
    os.environ.setdefault("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH", f"file://{DEMO_DIR / 'state'}/")
    os.environ.setdefault("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "gzip")
AIRFLOW_DATABASE = resolve_airflow_database(os.environ, embedded_path=DEMO_DIR / "airflow.sqlite3", demo=DEMO)
# On the demo's Airflow database the dashboard is the demo, and its own embedded files are the demo's; on any
# other, they are var/'s, which the demo never writes: its users and their shared password stay in the demo.
EMBEDDED_FILES_DIR = DEMO_DIR if AIRFLOW_DATABASE.embedded else VAR_DIR

DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])


def _embedded_secret_key() -> str:
    path = EMBEDDED_FILES_DIR / "secret_key"
    if not path.exists():
        EMBEDDED_FILES_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not EMBEDDED_DASHBOARD_DB:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DATABASE_URL is set. Generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    SECRET_KEY = _embedded_secret_key()

INSTALLED_APPS = [
    # statestore_admin.airflow first: its `migrate` never touches the Airflow database.
    "statestore_admin.airflow",
    "statestore_admin.records",  # the dashboard's own tables (Django label "state")
    "statestore_admin.identity",
    "statestore_admin.access",
    "statestore_admin.objects",
    "statestore_admin.grants",  # removes a deleted account's or group's scope grants as an audited change
    "statestore_admin.dashboard",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "statestore_admin.api",
    "statestore_admin.tokens",
    "statestore_admin.admin_site",  # after contrib.admin and contrib.auth: it registers User and Group again
    "statestore_admin.commands",
    "statestore_admin.commands.accounts",
    "statestore_admin.demo",
    "axes",  # last, as django-axes asks: login throttling (statestore_admin.throttling)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "statestore_admin.middleware.ApiErrorsAsJsonMiddleware",
    "csp.middleware.CSPMiddleware",
    # Outside every middleware that may answer by itself (the proxy's refusals, the time-zone and sign-in
    # redirects), so that each of their answers refuses frames too; framing.py puts the framable views' own
    # middleware just inside it.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "statestore_admin.middleware.RejectNulCharactersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "statestore_admin.middleware.PageLanguageMiddleware",  # the cookie's, the browser's or LANGUAGE_CODE
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "statestore_admin.sso.proxy.ProxySignInMiddleware",  # the authenticating proxy's headers (off by default)
    "statestore_admin.sso.sessions.SingleSignOnSessionMiddleware",  # ends single sign-on sessions (TOKEN_IDP_MAX_AGE)
    "statestore_admin.dashboard.languages.AccountLanguageMiddleware",  # the account's language; English for /api/
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "statestore_admin.dashboard.timezones.DisplayTimeZoneMiddleware",
    "statestore_admin.middleware.PageMessagesMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "statestore_admin.dashboard.http.caching.HtmxCacheMiddleware",  # Vary: HX-Request; partials never cached
    "statestore_admin.dashboard.http.framed.FramedLayoutMiddleware",  # request.framed: the layout without header
    "statestore_admin.middleware.DomainErrorMiddleware",
    "statestore_admin.middleware.AirflowDatabaseUnavailableMiddleware",
    "axes.middleware.AxesMiddleware",  # last: renders the lockout page
]

ROOT_URLCONF = "statestore_admin.urls"
WSGI_APPLICATION = "statestore_admin.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "statestore_admin.dashboard.context.capabilities",
                "statestore_admin.dashboard.context.environment",
                "statestore_admin.dashboard.context.airflow_source",
                "statestore_admin.sso.oidc.context",
            ],
        },
    },
]

# Databases ----------------------------------------------------------------------------------
# The Airflow series ("3.3" or "3.4") whose schema a new embedded (demo) or test Airflow database gets. A real
# Airflow database is never created: the dashboard reads which series it has (airflow/versions.py).
AIRFLOW_FIXTURE_SERIES = env.str("AIRFLOW_FIXTURE_SERIES", default="3.3")
if EMBEDDED_DASHBOARD_DB or AIRFLOW_DATABASE.embedded:
    EMBEDDED_FILES_DIR.mkdir(parents=True, exist_ok=True)

# A SQLite dashboard database (the embedded default, or DATABASE_URL=sqlite:///…) is written by every worker of
# `make serve` (sessions, tokens' last use, audit, the shared cache): in SQLite's write-ahead log readers never wait
# for a writer nor a writer for readers (in the default rollback journal each write locks every reader out, and
# under load requests queued behind it); a writer waits up to 20 s for its turn. Transactions stay deferred: BEGIN
# IMMEDIATE (the Airflow alias's, airflow/dburl.py) would take the write lock for every atomic block, reads too,
# and a /readyz probe's cache write then waited behind any open transaction.
DASHBOARD_SQLITE_OPTIONS = {"timeout": SQLITE_OPTIONS["timeout"], "init_command": "PRAGMA journal_mode=WAL"}
DATABASES = {
    "default": (
        env.db_url_config(f"sqlite:///{EMBEDDED_FILES_DIR / 'dashboard.sqlite3'}")
        if EMBEDDED_DASHBOARD_DB
        else env.db_url("DATABASE_URL")
    )
    | {"CONN_HEALTH_CHECKS": True, "CONN_MAX_AGE": env.int("DATABASE_CONN_MAX_AGE", default=60)},
    AIRFLOW_DB_ALIAS: {
        **AIRFLOW_DATABASE.settings,
        "CONN_HEALTH_CHECKS": True,
        "CONN_MAX_AGE": env.int("AIRFLOW_DATABASE_CONN_MAX_AGE", default=60),
    },
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {**DASHBOARD_SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
DATABASE_ROUTERS = ["statestore_admin.airflow.router.AirflowRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Airflow database timeouts -------------------------------------------------------------------
# PostgreSQL only (docs/operations.md, "When Airflow's database is slow, down or restarted"): seconds to
# connect; a deadline on every query that holds even when the server stops answering (the server's
# statement_timeout is set 1 s shorter); state_store_clean's longer deadline. 0: no deadline.
AIRFLOW_DATABASE_CONNECT_TIMEOUT = env.int("AIRFLOW_DATABASE_CONNECT_TIMEOUT", default=5)
AIRFLOW_DATABASE_QUERY_TIMEOUT = env.float("AIRFLOW_DATABASE_QUERY_TIMEOUT", default=30.0)
AIRFLOW_DATABASE_GC_QUERY_TIMEOUT = env.float("AIRFLOW_DATABASE_GC_QUERY_TIMEOUT", default=3600.0)
DATABASES[AIRFLOW_DB_ALIAS] = with_timeouts(
    DATABASES[AIRFLOW_DB_ALIAS], AIRFLOW_DATABASE_CONNECT_TIMEOUT, AIRFLOW_DATABASE_QUERY_TIMEOUT
)

# Where am I (README, Configuration) -----------------------------------------------------------
# A name for this deployment ("production", "staging") shown in a coloured band on every page and in the
# browser's title, and its colour: one of dashboard.checks.ENVIRONMENT_COLORS (statestore.E020 otherwise).
# Empty: no band (the demo names itself "demo").
STATESTORE_ENVIRONMENT = env.str("STATESTORE_ENVIRONMENT", default="demo" if DEMO else "")
STATESTORE_ENVIRONMENT_COLOR = env.str("STATESTORE_ENVIRONMENT_COLOR", default="green" if DEMO else "grey")

# State store ---------------------------------------------------------------------------------
# Dotted paths of custom [state_store] backends that subclass MetastoreBackend, for hosts where they
# cannot be imported: state_store_clean treats them as the metastore backend.
STATESTORE_METASTORE_BACKENDS = env.list("STATESTORE_METASTORE_BACKENDS", default=[])
# Also append every audit event to Airflow's own audit log (the `log` table), in the same transaction
# as the change: Airflow's Audit Log page and /api/v2/eventLogs then show the dashboard's changes.
AUDIT_TO_AIRFLOW_LOG = env.bool("AUDIT_TO_AIRFLOW_LOG", default=False)
# Airflow's UI (e.g. https://airflow.example.com): DAG, run, task instance and asset pages link to the same object
# there. Empty: Airflow's [api] base_url, if set; neither: no links. Only http(s) addresses are used.
AIRFLOW_UI_URL = env.str("AIRFLOW_UI_URL", default="")
# Managed Airflow (README, "Managed Airflow"; statestore_admin/airflow/rest.py): with AIRFLOW_API_URL and no
# AIRFLOW_DATABASE_URL the dashboard reaches Airflow through its REST API, with AIRFLOW_API_TOKEN or the output of
# AIRFLOW_API_TOKEN_COMMAND (run again before the token expires: a JWT's exp, else AIRFLOW_API_TOKEN_TTL seconds).
# Each request: AIRFLOW_API_TIMEOUT seconds to connect and to answer; AIRFLOW_API_RETRIES more attempts after a
# refused connection, 429 or 502-504; at most AIRFLOW_API_CONCURRENCY requests in flight per process.
AIRFLOW_API_URL = env.str("AIRFLOW_API_URL", default="").strip()
AIRFLOW_API_MODE = AIRFLOW_DATABASE.settings["ENGINE"] == NO_DATABASE
AIRFLOW_API_TOKEN = env.str("AIRFLOW_API_TOKEN", default="")
AIRFLOW_API_TOKEN_COMMAND = env.str("AIRFLOW_API_TOKEN_COMMAND", default="")
AIRFLOW_API_TOKEN_TTL = env.float("AIRFLOW_API_TOKEN_TTL", default=300.0)
AIRFLOW_API_TIMEOUT = env.float("AIRFLOW_API_TIMEOUT", default=10.0)
AIRFLOW_API_RETRIES = env.int("AIRFLOW_API_RETRIES", default=3)
AIRFLOW_API_CONCURRENCY = env.int("AIRFLOW_API_CONCURRENCY", default=8)
# Seconds a key search no index serves (no DAG filter) may scan before it stops and shows what it found so far.
SEARCH_TIME_BUDGET_SECONDS = env.float("SEARCH_TIME_BUDGET_SECONDS", default=2.0)
# Seconds an exact count on a large table (the overview's figures, the GC preview) may take on PostgreSQL before
# the planner's estimate is shown instead, with the age of its statistics (core/counting.py).
COUNT_BUDGET_SECONDS = env.float("COUNT_BUDGET_SECONDS", default=0.3)
# The GC page warns when the last successful state_store_clean run finished more than this many hours ago,
# or when at least this many task state rows have expired (docs/gc.md, The GC page).
GC_STALE_AFTER_HOURS = env.float("GC_STALE_AFTER_HOURS", default=26.0)
GC_BACKLOG_WARN_ROWS = env.int("GC_BACKLOG_WARN_ROWS", default=100_000)
# Keys one restore from a page or the API may hold (docs/audit.md, Undo); `state_store_restore` has no limit.
RESTORE_MAX_KEYS = env.int("RESTORE_MAX_KEYS", default=1000)

# Worker-side backends (docs/worker-backends.md) ---------------------------------------------------
# Read the objects behind common.io's worker-side references to show their values (key pages, ?resolve=true).
WORKER_BACKEND_READ = env.bool("WORKER_BACKEND_READ", default=DEMO)
# Largest value (decompressed bytes) read from an object for display.
WORKER_BACKEND_READ_MAX_BYTES = env.int("WORKER_BACKEND_READ_MAX_BYTES", default=1024 * 1024)
# Seconds a page waits for one object read before it says the storage did not answer (0: no deadline).
WORKER_BACKEND_READ_TIMEOUT = env.float("WORKER_BACKEND_READ_TIMEOUT", default=10.0)
# fsspec storage options by Airflow connection id (the conn_id in s3://conn_id@bucket/…), else by protocol,
# else "*": a JSON object, e.g. {"aws_default": {"profile": "airflow"}}. Empty: each library's own defaults
# (AWS_* variables, Google application default credentials, …).
WORKER_BACKEND_STORAGE_OPTIONS = env.json("WORKER_BACKEND_STORAGE_OPTIONS", default={})

# REST API -------------------------------------------------------------------------------------
# API tokens expire after at most this many days (also the default; `create_api_token --expires-in`).
API_TOKEN_MAX_AGE_DAYS = env.int("API_TOKEN_MAX_AGE_DAYS", default=365)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "statestore_admin.api.authentication.BearerTokenAuthentication",  # first: a 401 says "Bearer"
        "rest_framework.authentication.SessionAuthentication",  # the browser; enforces CSRF
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["statestore_admin.api.renderers.JSONRendererEscapingSurrogates"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "statestore_admin.api.errors.handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "statestore-admin API",
    "DESCRIPTION": "Airflow 3.3's /api/v2 state-store endpoints (wire-compatible), and statestore-admin's own "
    "search, statistics and GC dry run under /api/statestore/v1. Authenticate with `Authorization: Bearer <token>` "
    "(`manage.py create_api_token USERNAME`, or the API tokens page).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One name for a choice set several fields share (how each statistics figure was obtained).
    "ENUM_NAME_OVERRIDES": {"FigureHowEnum": "statestore_admin.api.serializers.stats.HOW"},
    "APPEND_COMPONENTS": {"securitySchemes": {"Bearer": {"type": "http", "scheme": "bearer"}}},
    "SECURITY": [{"Bearer": []}],
}

# Auth ---------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# First: checks the login throttle (django-axes) before any password is verified.
AUTHENTICATION_BACKENDS = [
    "statestore_admin.throttling.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]


def _group_mapping(name: str) -> dict[str, str]:
    """``group=Role,other group=Role`` (django-environ's dict), or a JSON object for group names with commas."""
    raw = env.str(name, default="").strip()
    if raw.startswith("{"):
        import json

        try:
            mapping = json.loads(raw)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from None
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise ImproperlyConfigured(f"{name} must map group names to names.")
        return mapping
    return {key.strip(): value.strip() for key, value in env.dict(name, default={}).items() if key.strip()}


# Single sign-on and the authenticating proxy (docs/sign-in.md): the provider's groups → a role (Viewer,
# Operator, Admin, or superuser) and → a Django group holding access scopes, applied at every sign-in.
OIDC_GROUP_ROLES = _group_mapping("OIDC_GROUP_ROLES")
OIDC_GROUP_SCOPES = _group_mapping("OIDC_GROUP_SCOPES")
# What an account that single sign-on or the proxy manages sees while no group or grant gives it a scope
# (docs/access.md, Scopes): empty, nothing (the default); `*`, every DAG and asset, as an unscoped account; or
# glob patterns matched against DAG ids and asset names and URIs alike (`etl_*,s3://shared/*`).
DEFAULT_SCOPE = env.list("DEFAULT_SCOPE", default=[])
# Seconds an account that single sign-on or the proxy manages keeps access after its last sign-in there: its API
# tokens stop working and its single sign-on sessions end past it, so that someone removed at the provider who
# never signs in again loses access too (docs/sign-in.md). Default one day.
TOKEN_IDP_MAX_AGE = env.int("TOKEN_IDP_MAX_AGE", default=24 * 3600)

# OpenID Connect sign-in (docs/sign-in.md, "OpenID Connect"; statestore_admin/sso/oidc.py) ---------------------
# OIDC_ISSUER turns it on: the provider's issuer URL, whose /.well-known/openid-configuration the dashboard reads.
# The login page then offers "Sign in with OIDC_PROVIDER_NAME" (default: the issuer's host name), which the audit
# trail also records. OIDC_GROUPS_CLAIM and OIDC_USERNAME_CLAIM: the ID token's claims that carry the person's
# groups and their username. OIDC_TIMEOUT: seconds to wait for each request to the provider.
OIDC_ISSUER = env.str("OIDC_ISSUER", default="")
OIDC_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="")
OIDC_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
OIDC_SCOPES = env.str("OIDC_SCOPES", default="openid email profile groups").replace(",", " ").split()
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="groups")
OIDC_USERNAME_CLAIM = env.str("OIDC_USERNAME_CLAIM", default="preferred_username")
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="")
OIDC_TIMEOUT = env.float("OIDC_TIMEOUT", default=5.0)

# Behind an authenticating proxy (docs/sign-in.md, "Behind an authenticating proxy"; statestore_admin/sso/proxy.py):
# requests whose REMOTE_ADDR is one of TRUSTED_PROXY_ADDRESSES (addresses or CIDR networks; empty: the mode is off)
# and carry PROXY_USER_HEADER are signed in as that user, with PROXY_EMAIL_HEADER and PROXY_GROUPS_HEADER
# (comma-separated, as oauth2-proxy sends them) through the group mapping above. The same headers from any other
# address are ignored and logged. PROXY_PROVIDER_NAME: the proxy's name in the audit trail ("authenticating proxy
# (oauth2-proxy)"; empty: "authenticating proxy").
TRUSTED_PROXY_ADDRESSES = env.list("TRUSTED_PROXY_ADDRESSES", default=[])
PROXY_USER_HEADER = env.str("PROXY_USER_HEADER", default="X-Forwarded-User")
PROXY_EMAIL_HEADER = env.str("PROXY_EMAIL_HEADER", default="X-Forwarded-Email")
PROXY_GROUPS_HEADER = env.str("PROXY_GROUPS_HEADER", default="X-Forwarded-Groups")
PROXY_PROVIDER_NAME = env.str("PROXY_PROVIDER_NAME", default="")
# Off: no password sign-in at all (the login page and /admin/login/ refuse it), allowed only with single sign-on
# or the proxy (statestore.E047). A superuser then gets in through `manage.py break_glass` (docs/sign-in.md).
LOCAL_PASSWORDS = env.bool("LOCAL_PASSWORDS", default=True)

# Login and token throttling (README, "Login and token throttling") -----------------------------
# Sign-in (the login page and /admin/login/, django-axes): after LOGIN_FAILURE_LIMIT failures for one
# username, or from one address, further attempts get the lockout page (429) for LOGIN_LOCKOUT_MINUTES.
# API tokens (statestore_admin.throttling): after TOKEN_FAILURE_LIMIT wrong bearer tokens from one address
# within TOKEN_LOCKOUT_MINUTES, bearer requests from it answer 429 with Retry-After until the window passes.
# Successful sign-ins and token uses never count. TRUSTED_PROXY_COUNT: how many reverse proxies in front
# append to X-Forwarded-For (0: the client address is REMOTE_ADDR; behind one proxy, set 1).
LOGIN_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
LOGIN_LOCKOUT_MINUTES = env.float("LOGIN_LOCKOUT_MINUTES", default=15)
TOKEN_FAILURE_LIMIT = env.int("TOKEN_FAILURE_LIMIT", default=10)
TOKEN_LOCKOUT_MINUTES = env.float("TOKEN_LOCKOUT_MINUTES", default=15)
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT

# Prometheus metrics (README, "Metrics"): /metrics answers 404 until one of these is set. METRICS_TOKEN: a
# scraper's bearer token; METRICS_ALLOWED_IPS: addresses or networks (CIDR) that may scrape without one.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: per username, and per address
AXES_RESET_ON_SUCCESS = False  # a success from an address must not wipe the failures counted against others
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_CLIENT_IP_CALLABLE = "statestore_admin.throttling.client_address"

# The cache (README, "Production"; statestore_admin/cache.py): the token-failure tickets, snapshot sums, capped
# counts and the list of DAGs with state live there, so every worker of every server must share it. Default:
# Django's database cache in the dashboard's own database (its table is created by `migrate`), which needs no
# other service. CACHE_URL=redis://host:6379/1 (or rediss://, unix:///path.sock): Django's Redis cache, for several
# servers, with short socket deadlines (CACHE_TIMEOUT seconds) so that a Redis that is down or hung costs a request
# little; either way a cache that fails answers as an empty one, never a 500, and what it stores is signed JSON, never
# a pickle. Another CACHE_URL: django-environ's backend as it is, if it keeps values in this process's memory
# (locmemcache://, dummycache://; statestore.W004 under several workers); one that would unpickle what a
# shared store holds (dbcache://, filecache://, memcache://, rediscache://...) is refused (statestore.E012).
# Sessions are in the database (Django's default engine), as JSON (its default serializer).
CACHE_URL = env.str("CACHE_URL", default="")
CACHE_TIMEOUT = env.float("CACHE_TIMEOUT", default=0.5)
# Redis by any URL redis-py reads (unix:// is a socket on this host; a scheme's case does not matter): always the
# dashboard's backend, never django-environ's (which refuses unix:// and would pickle).
_cache_scheme, _, _cache_rest = CACHE_URL.partition("://")
if _cache_scheme.lower() in ("redis", "rediss", "unix"):
    CACHES = {
        "default": {
            "BACKEND": "statestore_admin.cache.RedisCache",
            "LOCATION": f"{_cache_scheme.lower()}://{_cache_rest}",  # redis-py reads the scheme in lower case only
            "OPTIONS": {"socket_connect_timeout": CACHE_TIMEOUT, "socket_timeout": CACHE_TIMEOUT},
        }
    }
elif CACHE_URL:
    CACHES = {"default": env.cache_url("CACHE_URL")}
else:
    CACHES = {
        "default": {
            "BACKEND": "statestore_admin.cache.DatabaseCache",
            "LOCATION": "statestore_cache",  # records.models.CacheEntry
            # Django culls a third of the entries past MAX_ENTRIES (300 by default), throttle tickets included.
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    }

SESSION_COOKIE_HTTPONLY = True
# How long a sign-in lasts (seconds; Django's two weeks by default). A single sign-on session ends sooner, once its
# account's last sign-in at the provider is older than TOKEN_IDP_MAX_AGE.
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=14 * 24 * 3600)
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=not DEBUG and not EMBEDDED_DASHBOARD_DB)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
if env.bool("BEHIND_TLS_PROXY", default=False):  # a reverse proxy terminates TLS and sets X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
X_FRAME_OPTIONS = "DENY"

# Security headers ------------------------------------------------------------------------------
# Content-Security-Policy (django-csp): our own static files only. No inline script or style and no
# eval: htmx's indicator styles are off (base.html's htmx-config), the pages keep their JS and CSS in
# static/, and Swagger UI (/api/docs/) loads its initialiser as a script of its own (split view).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}


def allow_form_action(csp: dict, url: str) -> dict:
    """``csp`` with the origin of ``url`` added to form-action. Browsers apply form-action to where a form's answer
    redirects: the Sign out form's logout continues to the OpenID provider's end-session endpoint."""
    parts = urlsplit(url)
    directives = csp["DIRECTIVES"]
    return {
        **csp,
        "DIRECTIVES": {**directives, "form-action": [*directives["form-action"], f"{parts.scheme}://{parts.netloc}"]},
    }


if OIDC_ISSUER:
    CONTENT_SECURITY_POLICY = allow_form_action(CONTENT_SECURITY_POLICY, OIDC_ISSUER)
# Airflow's UI may frame the read pages when its origins are listed (https, or http on localhost/127.0.0.1:
# statestore_admin/framing.py); none by default.
try:
    STATESTORE_FRAME_ANCESTORS = [frame_origin(o) for o in env.list("STATESTORE_FRAME_ANCESTORS", default=[])]
except ValueError as exc:
    raise ImproperlyConfigured(f"STATESTORE_FRAME_ANCESTORS: {exc}") from None
globals().update(framing_settings(STATESTORE_FRAME_ANCESTORS, middleware=MIDDLEWARE))
# HSTS for subdomains and the browsers' preload list are the operator's decision (README, Production).
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)

# I18n ---------------------------------------------------------------------------------------
# The pages speak the account's chosen language, else the browser's (Accept-Language), else LANGUAGE_CODE
# (dashboard/languages.py); the APIs always answer in English. Catalogues: locale/ (docs/languages.md).
USE_I18N = True
LANGUAGES = [
    ("en", "English"),
    ("ko", "Korean"),
    ("ja", "Japanese"),
    ("zh-hans", "Simplified Chinese"),  # also served for zh, zh-CN and zh-SG (Django's fallbacks)
    ("de", "German"),
    ("fr", "French"),
    ("es", "Spanish"),
]
LANGUAGE_CODE = env.str("LANGUAGE_CODE", default="en")  # one of LANGUAGES (Django's check translation.E004)
LOCALE_PATHS = [BASE_DIR / "locale"]
FORMAT_MODULE_PATH = ["statestore_admin.formats"]  # times and numbers per language, over Django's
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600  # the sign-in page's language, chosen there or before signing out
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_TZ = True

# Static files (served by WhiteNoise; nothing from a CDN) -------------------------------------
# `manage.py collectstatic` (run by `make serve`) writes hashed, compressed copies to STATIC_ROOT, served
# with far-future caching. Until it has run (no manifest), WhiteNoise serves the source folders at plain
# URLs instead, so that a page never fails for a missing static file (statestore_admin.staticfiles).
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "statestore_admin.staticfiles.ManifestStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG or not (STATIC_ROOT / "staticfiles.json").exists()
# Files served at the site's root, before sign-in: /favicon.ico, which browsers ask for by themselves.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

# Health endpoints (statestore_admin.health): probes speak plain HTTP to the server itself, and a redirect
# to HTTPS (BEHIND_TLS_PROXY) would count as success for them. They answer in place.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]  # probes and scrapers on plain HTTP

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes logs "AXES: BEGIN version …" at INFO as every process starts: each manage.py command (a cron
    # job mails what it prints) and gunicorn worker. Its sign-in failures and lockouts log elsewhere, and stay.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}
