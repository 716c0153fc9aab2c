"""django-axes in front of the model backend, for requests only."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginLockoutBackend(AxesStandaloneBackend):
    """Axes' lockout check for every login that comes with a request (the login page,
    auth/token/). A call without one comes from code, not from someone guessing passwords
    online (a management command, Django's test client's `login`), and is left to the model
    backend instead of being refused."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
