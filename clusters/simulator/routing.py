"""A tiny request/response model and regex router shared by the API and control endpoints."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusters.simulator.objects import ApiError


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        """The body parsed as JSON; a 400 `Status` when it is not JSON."""
        if not self.body:
            raise ApiError(400, "the request body is empty")
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc


@dataclass
class Response:
    """An answer: `document` is JSON, or text when it is a `str`.

    `stream`, for a text answer, is (more, seconds): after the text, the server sends what
    `more()` returns every tenth of a second for `seconds`, then closes (a bounded follow).
    """

    code: int
    document: Any
    headers: list[tuple[str, str]] = field(default_factory=list)
    stream: tuple[Callable[[], str], float] | None = None


Handler = Callable[..., Response]


class Router:
    """Maps (method, path regex) to handlers; unknown paths are 404, wrong methods 405."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(f"^{pattern}/?$"), handler))

    def dispatch(self, context: Any, request: Request) -> Response:
        path_matched = False
        for method, pattern, handler in self._routes:
            match = pattern.match(request.path)
            if match is None:
                continue
            path_matched = True
            if method == request.method:
                return handler(context, request, **match.groupdict())
        if path_matched:
            raise ApiError(405, f"the server does not allow the method {request.method} here")
        raise ApiError(404, "the server could not find the requested resource")
