"""`manage.py check --deploy` is clean in production mode (settings from the environment only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "SECRET_KEY": "x7#Qv9!mZ2@pL4$wR8^tY6&uI1*oP3(aS5)dF0_gH-jK+lZ=cX" * 2,
    "RLARK_CREDENTIAL_KEYS": "ZGV2ZWxvcG1lbnQtb25seS1rZXktMzItYnl0ZXMhISE=",
    "ALLOWED_HOSTS": "rlark.example.com",
    "RLARK_HTTPS": "1",
    "RLARK_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def _check(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in {"DEBUG", "RLARK_DEV_SECRETS", "SECRET_KEY", "RLARK_HTTPS",
                         "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120,
    )


def test_check_deploy_is_clean_in_production_mode() -> None:
    result = _check(**PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_without_https() -> None:
    result = _check(**{**PRODUCTION, "RLARK_HTTPS": "0"})
    assert result.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert warning in result.stdout + result.stderr
