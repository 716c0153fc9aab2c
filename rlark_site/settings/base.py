from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.conf import BASE_DIR, env_bool, env_list, env_str

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
ROOT_URLCONF = "rlark_site.urls"
WSGI_APPLICATION = "rlark_site.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "knox",
    "axes",
    "drf_spectacular",
    "csp",
    "drf_spectacular_sidecar",
    "django_htmx",
    "mozilla_django_oidc",
    "pgtrigger",
    "pghistory",
    "pghistory.admin",
    "rlark_site.foundation.tenancy",
    "rlark_site.foundation.audit",
    "clusters",
    "jobs",
]

MIDDLEWARE = [
    "rlark_site.foundation.exceptions.ApiErrorShapeMiddleware",
    "rlark_site.foundation.apiversion.ApiVersionMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "rlark_site.foundation.guard.RequestGuardMiddleware",
    "rlark_site.foundation.exceptions.ApiTrailingSlashMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "rlark_site.foundation.exceptions.DomainErrorMiddleware",
    "axes.middleware.AxesMiddleware",
    "rlark_site.foundation.audit.middleware.AuditContextMiddleware",
    "rlark_site.foundation.logcontext.RequestContextMiddleware",
]

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
                "django.template.context_processors.i18n",
                "rlark_site.foundation.tenancy.context_processors.tenancy",
                "rlark_site.navigation.nav_links",
                "rlark_site.foundation.sso.sso_context",
                "jobs.context_processors.pending_requests",
                "jobs.context_processors.live_debounce",
            ],
        },
    },
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
USE_TZ = True
TIME_ZONE = env_str("TIME_ZONE", "UTC")

STATIC_URL = "/static/"
# Production: set RLARK_STATIC_ROOT and run `manage.py collectstatic`; development serves from
# the app directories through whitenoise's finders.
STATIC_ROOT = env_str("RLARK_STATIC_ROOT") or None
STATICFILES_DIRS = [BASE_DIR / "rlark_site" / "static"]
WHITENOISE_USE_FINDERS = True

# Sessions are written to PostgreSQL and read from the Redis cache (a page request does not
# query the session table); a cache miss falls back to the database.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Audit: every tracked model records inserts, updates and deletes; event rows are append-only
# (a database trigger refuses UPDATE/DELETE on them).
PGHISTORY_APPEND_ONLY = True
