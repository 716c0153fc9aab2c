from __future__ import annotations

from datetime import timedelta

from rlark_site.foundation.apiversion import API_VERSION_TEXT
from rlark_site.foundation.conf import env_int, env_str

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rlark_site.foundation.tenancy.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "rlark_site.foundation.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rlark_site.foundation.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "rlark_site.foundation.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Counted in the Redis cache (CACHES["default"]); `auth` is per username (auth/token/).
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("RLARK_THROTTLE_ANON", "300/minute"),
        "user": env_str("RLARK_THROTTLE_USER", "1200/minute"),
        "auth": env_str("RLARK_THROTTLE_AUTH", "10/minute"),
    },
}

# API tokens (django-rest-knox): stored as SHA-512 digests, named, expiring, revocable.
KNOX_TOKEN_MODEL = "tenancy.ApiToken"
# knox's own migrations would create its (swapped-out, unused) knox_authtoken table.
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env_int("RLARK_TOKEN_TTL_DAYS", 30)),
    "TOKEN_PREFIX": "rlark_",
    "AUTH_HEADER_PREFIX": "Token",
}
RLARK_TOKEN_MAX_TTL_DAYS = env_int("RLARK_TOKEN_MAX_TTL_DAYS", 365)

SPECTACULAR_SETTINGS = {
    "TITLE": "RLark API",
    "DESCRIPTION": "Launch distributed reinforcement-learning runs on Kubernetes.",
    "VERSION": f"{API_VERSION_TEXT}.0",  # the X-RLark-API-Version header's, .0
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "rlark_site.foundation.openapi.add_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ClusterStateEnum": "clusters.models.ClusterState",
        "VerificationStateEnum": "clusters.models.VerificationState",
        "JobStateEnum": "jobs.models.JobState",
        "SubmissionStateEnum": "jobs.models.SubmissionState",
        "ConfirmationStateEnum": "jobs.models.ConfirmationState",
    },
}
