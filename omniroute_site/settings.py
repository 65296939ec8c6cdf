"""The one settings module: everything comes from the environment (spec 08 §1).

With no environment at all the gateway runs embedded: SQLite in ``./data``, a
generated secret key, in-process routing state.  Gateway-wide *routing* settings
(timeouts, breakers, …) are not here: they live in the config ``settings:`` block.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import socket
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.core.exceptions import ImproperlyConfigured

from omniroute_site.env import env_bool, env_int, env_json_object, env_list, env_str
from providers.outbound_policy import ProxyRules

BASE_DIR = Path(__file__).resolve().parent.parent

OMNIROUTE_ENV = (env_str("OMNIROUTE_ENV", "embedded") or "embedded").strip().lower()
if OMNIROUTE_ENV not in {"embedded", "production"}:
    raise ImproperlyConfigured(
        f"OMNIROUTE_ENV: expected embedded or production, got {OMNIROUTE_ENV!r}"
    )
IS_PRODUCTION = OMNIROUTE_ENV == "production"

OMNIROUTE_DATA_DIR = Path(env_str("OMNIROUTE_DATA_DIR", str(BASE_DIR / "data")) or ".")


def _embedded_secret_key() -> str:
    """Generated once into ``<data dir>/secret_key`` (mode 0600) and reused."""
    path = OMNIROUTE_DATA_DIR / "secret_key"
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    OMNIROUTE_DATA_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key)
    return key


_secret = env_str("DJANGO_SECRET_KEY")
SECRET_KEY_FROM_ENV = bool(_secret)
SECRET_KEY = _secret or ("" if IS_PRODUCTION else _embedded_secret_key())


def _derived_fernet_key(secret_key: str) -> str:
    """HKDF-SHA256(secret, salt "omniroute", info "fernet-v1"), base64url."""
    raw = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"omniroute", info=b"fernet-v1"
    ).derive(secret_key.encode("utf-8"))
    return base64.urlsafe_b64encode(raw).decode("ascii")


_fernet_keys = env_list("OMNIROUTE_ENCRYPTION_KEY", [])
OMNIROUTE_ENCRYPTION_KEY_DERIVED = not _fernet_keys
OMNIROUTE_ENCRYPTION_KEYS = _fernet_keys or (
    [_derived_fernet_key(SECRET_KEY)] if SECRET_KEY and not IS_PRODUCTION else []
)

DEBUG = env_bool("DJANGO_DEBUG", False)
# ★ in production: the default is for embedded mode only (omniroute.E003 when unset).
ALLOWED_HOSTS_FROM_ENV = env_str("DJANGO_ALLOWED_HOSTS") is not None
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
if env_bool("OMNIROUTE_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "daphne",
    # the admin theme (issue #15): before django.contrib.admin, whose templates it
    # overrides; see omniroute_site/admin_theme.py for the navigation
    "unfold",
    "unfold.contrib.filters",
    "unfold.contrib.forms",
    "django.contrib.admin",
    "django.contrib.auth",
    "axes",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_prometheus",
    "django_celery_beat",
    "providers",
    "combos",
    "telemetry",
    "gateway",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as django-axes asks: refuses a locked-out admin login (spec 08 §5)
    "axes.middleware.AxesMiddleware",
]

# Admin login throttling (django-axes): after OMNIROUTE_LOGIN_FAILURE_LIMIT wrong
# passwords for one username from one address, that pair is locked out for
# OMNIROUTE_LOGIN_LOCKOUT_MINUTES (429); a success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("OMNIROUTE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(
    minutes=env_int("OMNIROUTE_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# The console is the only place a person logs in: a login without ``next`` (the
# admin's own page opened directly) lands on its dashboard, not Django's default
# /accounts/profile/ (which urls.py also sends to the dashboard).
LOGIN_URL = "admin:login"
LOGIN_REDIRECT_URL = "admin:index"

ROOT_URLCONF = "omniroute_site.urls"
ASGI_APPLICATION = "omniroute_site.asgi.application"

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
            ],
        },
    },
]


def _database(url: str | None) -> dict[str, object]:
    if not url:
        OMNIROUTE_DATA_DIR.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{OMNIROUTE_DATA_DIR / 'omniroute.sqlite3'}"
    config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=0))
    engine = str(config["ENGINE"])
    if engine.endswith("sqlite3"):
        # WAL lets the log writer and the admin write while readers read (spec 08 §2.1).
        config["OPTIONS"] = {
            "timeout": 5,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif "postgresql" in engine:
        pool_size = env_int("OMNIROUTE_DB_POOL_SIZE", 10, minimum=1)
        # a database outage fails a query in seconds, not the pool's 30 s default
        # (issue #16): the probes, the scrape and the shutdown flush stay bounded
        wait_s = env_int("OMNIROUTE_DB_POOL_TIMEOUT_S", 5, minimum=1)
        config["OPTIONS"] = {
            "pool": {"min_size": 1, "max_size": pool_size, "timeout": wait_s},
            "connect_timeout": 3,
        }
    return config


DATABASE_URL = env_str("DATABASE_URL")
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL") or None
OMNIROUTE_REDIS_TIMEOUT_MS = env_int("OMNIROUTE_REDIS_TIMEOUT_MS", 50, minimum=1)
OMNIROUTE_READYZ_REQUIRE_REDIS = env_bool("OMNIROUTE_READYZ_REQUIRE_REDIS", True)
# the worker processes of this node (uvicorn --workers): while Redis is away each
# admits against its share of a key's limits (spec 08 §3.3, issue #16)
OMNIROUTE_WORKERS = env_int("WEB_CONCURRENCY", 1, minimum=1)

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The data plane (spec 08 §1).
OMNIROUTE_MAX_BODY_BYTES = env_int(
    "OMNIROUTE_MAX_BODY_BYTES", 10 * 1024 * 1024, minimum=1
)
# Front-door limits (issue #16): all request headers together (431 beyond), the time
# from a connection's (or request's) first byte to its last header byte, and the
# longest silence while a body arrives (408 and the connection closed for both).
OMNIROUTE_MAX_HEADER_BYTES = env_int(
    "OMNIROUTE_MAX_HEADER_BYTES", 64 * 1024, minimum=1024
)
OMNIROUTE_HEADER_TIMEOUT_S = env_int("OMNIROUTE_HEADER_TIMEOUT_S", 10, minimum=1)
OMNIROUTE_BODY_TIMEOUT_S = env_int("OMNIROUTE_BODY_TIMEOUT_S", 30, minimum=1)
OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS = env_int(
    "OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS", 10_000, minimum=1
)
OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS = env_int(
    "OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS", 300_000, minimum=1
)
OMNIROUTE_UPSTREAM_MAX_CONNECTIONS = env_int(
    "OMNIROUTE_UPSTREAM_MAX_CONNECTIONS", 200, minimum=1
)
OMNIROUTE_UPSTREAM_MAX_KEEPALIVE = env_int(
    "OMNIROUTE_UPSTREAM_MAX_KEEPALIVE", 50, minimum=0
)


def _ca_bundle() -> str | None:
    """The trust store of every outbound call (spec 10 §4): the PEM file named by
    OMNIROUTE_CA_BUNDLE, else by SSL_CERT_FILE, else None (the system store)."""
    for name in ("OMNIROUTE_CA_BUNDLE", "SSL_CERT_FILE"):
        value = (env_str(name) or "").strip()
        if value:
            if not Path(value).is_file():
                raise ImproperlyConfigured(f"{name}: {value!r} is not a readable file")
            return value
    return None


# Outbound HTTP (spec 10 §4), for every outbound call: the one trust store, and the
# proxies of HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY (lower-case names win).
OMNIROUTE_CA_BUNDLE = _ca_bundle()
try:
    OMNIROUTE_OUTBOUND_PROXIES = ProxyRules.from_environ(os.environ)
except ValueError as exc:  # the message names the variable, never its credentials
    raise ImproperlyConfigured(str(exc)) from None
OMNIROUTE_CONFIG_POLL_MS = env_int("OMNIROUTE_CONFIG_POLL_MS", 1000, minimum=50)
OMNIROUTE_SHUTDOWN_GRACE_SECONDS = env_int(
    "OMNIROUTE_SHUTDOWN_GRACE_SECONDS", 30, minimum=0
)
OMNIROUTE_METRICS_TOKEN = env_str("OMNIROUTE_METRICS_TOKEN") or None
# Completion tokens reserved by a request that sets no max_tokens (spec 08 §6).
OMNIROUTE_RESERVE_COMPLETION_TOKENS = env_int(
    "OMNIROUTE_RESERVE_COMPLETION_TOKENS", 1024, minimum=0
)
OMNIROUTE_LOG_LEVEL = (env_str("OMNIROUTE_LOG_LEVEL", "INFO") or "INFO").strip().upper()
if OMNIROUTE_LOG_LEVEL not in logging.getLevelNamesMapping():
    raise ImproperlyConfigured(
        "OMNIROUTE_LOG_LEVEL: expected DEBUG, INFO, WARNING, ERROR or CRITICAL, "
        f"got {OMNIROUTE_LOG_LEVEL!r}"
    )
OMNIROUTE_LOG_RETENTION_DAYS = env_int("OMNIROUTE_LOG_RETENTION_DAYS", 30, minimum=1)
# spec 09 §3.4: how long a stored Responses answer stays readable
OMNIROUTE_RESPONSES_TTL_DAYS = env_int("OMNIROUTE_RESPONSES_TTL_DAYS", 30, minimum=1)
# spec 09 §4.4: no_healthy_candidate on /v1/messages as Anthropic's 529 overloaded_error
OMNIROUTE_MESSAGES_OVERLOADED_529 = env_bool("OMNIROUTE_MESSAGES_OVERLOADED_529", False)
OMNIROUTE_LOG_BUFFER_ROWS = env_int("OMNIROUTE_LOG_BUFFER_ROWS", 10_000, minimum=1)
OMNIROUTE_LOG_FLUSH_MS = env_int("OMNIROUTE_LOG_FLUSH_MS", 1000, minimum=10)
OMNIROUTE_LOG_SYNC = env_bool("OMNIROUTE_LOG_SYNC", False)
# Session keeping (spec 05 §1, 08 §2)
OMNIROUTE_SESSION_KEEPING = env_bool("OMNIROUTE_SESSION_KEEPING", True)
OMNIROUTE_SESSION_AUTO_DETECT = env_bool("OMNIROUTE_SESSION_AUTO_DETECT", True)
OMNIROUTE_SESSION_EXTRA_HEADERS = [
    h.strip().lower() for h in env_list("OMNIROUTE_SESSION_EXTRA_HEADERS", []) if h
]
OMNIROUTE_SESSION_PIN_TTL_SECONDS = env_int(
    "OMNIROUTE_SESSION_PIN_TTL_SECONDS", 3600, minimum=1
)
OMNIROUTE_SESSION_MAX_PINS = env_int("OMNIROUTE_SESSION_MAX_PINS", 10_000, minimum=1)
OMNIROUTE_NODE = f"{socket.gethostname()}:{os.getpid()}"
# Multiprocess metrics (several workers): prometheus_client refuses a missing folder at
# the first metric write, which would crash every manage.py command; create it.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
# Custom router strategies (spec 04 §8): dotted module paths, comma-separated. The
# ``combos`` app imports them in ``ready()``, so in every process, before any config
# is validated; a module that cannot be imported stops start-up.
OMNIROUTE_ROUTER_STRATEGY_MODULES = env_list("OMNIROUTE_ROUTER_STRATEGY_MODULES", [])
# The Nadir router reads its key from the environment at call time (spec 04 §8), so a
# key given as ``OMNIROUTE_NADIR_API_KEY_FILE`` (§1: any secret may be a file) is put
# there, in this process only.
_nadir_key = env_str("OMNIROUTE_NADIR_API_KEY")
if _nadir_key and "OMNIROUTE_NADIR_API_KEY" not in os.environ:
    os.environ["OMNIROUTE_NADIR_API_KEY"] = _nadir_key

# Django security (spec 08 §5.5).
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
SESSION_COOKIE_SECURE = IS_PRODUCTION
CSRF_COOKIE_SECURE = IS_PRODUCTION

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# issue #15: one date-time format in the console (Y-m-d H:i:s)
FORMAT_MODULE_PATH = ["omniroute_site.formats"]
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = OMNIROUTE_DATA_DIR / "static"
# The admin's assets are served by WhiteNoise, straight from the apps in embedded mode
# (no collectstatic needed) and from STATIC_ROOT in the image (spec 08 §2.2).
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "combos.api_auth.AdminTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # staff, and the admin's model permission for the method (spec 08 §5.3)
    "DEFAULT_PERMISSION_CLASSES": ["combos.api_permissions.ModelPermissions"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "combos.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OmniRoute control plane",
    "VERSION": "0.1.0",
    # the API docs page serves Swagger UI from this install, not from a CDN
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
}

# The admin console's theme (django-unfold) and navigation (issue #15).

# The admin console's theme (django-unfold) and navigation (issue #15).
from omniroute_site import admin_theme  # noqa: E402

UNFOLD = admin_theme.UNFOLD

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact": {"()": "telemetry.sanitize.RedactingFilter"},
        "forbidden_one_line": {"()": "omniroute_site.log_filters.ForbiddenInOneLine"},
    },
    "formatters": {
        "line": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "stdout": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": "line",
            "filters": ["redact"],
        }
    },
    "root": {"handlers": ["stdout"], "level": OMNIROUTE_LOG_LEVEL},
    "loggers": {
        # uvicorn's handlers are its own: its error log (tracebacks of the ASGI app)
        # gets the filter on the logger, before the record reaches them.
        # (uvicorn.access keeps its own handler: telemetry.apps adds its filter)
        "uvicorn.error": {"filters": ["redact"]},
        "django.request": {"filters": ["forbidden_one_line"]},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "channels_redis": {"level": "WARNING"},
    },
}

# Celery (worker and beat in production; spec 08 §2.2).
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# Scheduled jobs (spec 06 §3).  Sync sources and their sanity minimums:
OMNIROUTE_MODELS_DEV_URL = (
    env_str("OMNIROUTE_MODELS_DEV_URL", "https://models.dev/api.json")
    or "https://models.dev/api.json"
)
OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = env_int(
    "OMNIROUTE_MODELS_DEV_MIN_PROVIDERS", 50, minimum=0
)
OMNIROUTE_ARENA_ELO_SYNC_ENABLED = env_bool("OMNIROUTE_ARENA_ELO_SYNC_ENABLED", True)
# LMArena's official dataset (subset text_style_control, split latest) through the
# Hugging Face datasets-server, one URL per kept category (spec 06 §3.3).
_ARENA_FILTER_URL = (
    "https://datasets-server.huggingface.co/filter?dataset=lmarena-ai%2F"
    "leaderboard-dataset&config=text_style_control&split=latest"
    "&where=%22category%22%3D%27{category}%27"
)
OMNIROUTE_ARENA_URLS = env_list(
    "OMNIROUTE_ARENA_URLS",
    [_ARENA_FILTER_URL.format(category=c) for c in ("overall", "coding")],
)
OMNIROUTE_ARENA_FORMAT = (
    (env_str("OMNIROUTE_ARENA_FORMAT", "auto") or "auto").strip().lower()
)
if OMNIROUTE_ARENA_FORMAT not in {"auto", "hf-rows", "arena-catalog"}:
    raise ImproperlyConfigured(
        "OMNIROUTE_ARENA_FORMAT: expected auto, hf-rows or arena-catalog, "
        f"got {OMNIROUTE_ARENA_FORMAT!r}"
    )
OMNIROUTE_ARENA_MIN_MODELS = env_int("OMNIROUTE_ARENA_MIN_MODELS", 20, minimum=0)
# Configured provider slug -> models.dev provider id, for the catalog match (§3.2).
OMNIROUTE_CATALOG_PROVIDER_MAP = env_json_object("OMNIROUTE_CATALOG_PROVIDER_MAP")

# Who runs that schedule (issue #15): ``in-process`` starts a scheduling thread in
# each gateway process (one of them leads, providers.scheduler), ``off`` leaves it to
# Celery beat or ``manage.py run_jobs``.  The embedded default runs it in-process.
OMNIROUTE_SCHEDULER = (
    (env_str("OMNIROUTE_SCHEDULER", "off" if IS_PRODUCTION else "in-process") or "")
    .strip()
    .lower()
)
if OMNIROUTE_SCHEDULER not in {"in-process", "off"}:
    raise ImproperlyConfigured(
        f"OMNIROUTE_SCHEDULER: expected in-process or off, got {OMNIROUTE_SCHEDULER!r}"
    )

# The schedule, as data (spec 06 §3.1): job -> Celery task, crontab "m h dom mon dow"
# or seconds, and the interval after which a queued run expires (a backlog after
# downtime is dropped, not replayed).  ``manage.py run_jobs`` reads the same table.
OMNIROUTE_JOB_SCHEDULE: dict[str, dict[str, str | int]] = {
    "sync_models_dev": {
        "task": "providers.tasks.sync_models_dev_task",
        "schedule": "17 */6 * * *",
        "expires": 6 * 3600,
    },
    "sync_arena_elo": {
        "task": "providers.tasks.sync_arena_elo_task",
        "schedule": "23 3 * * *",
        "expires": 24 * 3600,
    },
    "compute_reliability_24h": {
        "task": "telemetry.tasks.compute_reliability_24h_task",
        "schedule": 600,
        "expires": 600,
    },
    "prune_logs": {
        "task": "telemetry.tasks.prune_logs_task",
        "schedule": "41 4 * * *",
        "expires": 24 * 3600,
    },
}
if not OMNIROUTE_ARENA_ELO_SYNC_ENABLED:
    del OMNIROUTE_JOB_SCHEDULE["sync_arena_elo"]


def _beat_schedule(schedule: str | int) -> crontab | int:
    if isinstance(schedule, int):
        return schedule
    minute, hour, day_of_month, month_of_year, day_of_week = schedule.split()
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
    )


# Keyed by task name (style §5).  ``expire_seconds`` is the same bound as stored by
# django-celery-beat's DatabaseScheduler, which ignores ``expires``.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    str(entry["task"]): {
        "task": entry["task"],
        "schedule": _beat_schedule(entry["schedule"]),
        "options": {"expires": entry["expires"], "expire_seconds": entry["expires"]},
    }
    for entry in OMNIROUTE_JOB_SCHEDULE.values()
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
