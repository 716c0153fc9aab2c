"""The REST API over the standard library's `http.client` (imported on the first request, so
`rlark --help` never pays for it): one connection per command, JSON in and out, and every way a
request can fail turned into one clear line (`CliError`) with its exit code.

The token goes only into the `Authorization` header; no message, warning or error shows it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from rlark_cli import API_VERSION, UPDATE_COMMAND
from rlark_cli.errors import BLOCKED, NOT_FOUND, USAGE, CliError

API_PREFIX = "/api/v1/"
MAX_ANSWER_BYTES = 64 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
VERSION_HEADER = "X-RLark-API-Version"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    data: Any  # parsed JSON, or text for other content types


def q(name: str) -> str:
    """A job (or pod) name as one path segment."""
    return quote(name, safe="")


def site_url(url: str) -> str:
    """The site's base URL as the user typed it, without a trailing `/` or `/api/v1`."""
    text = url.strip().rstrip("/")
    if text.endswith("/api/v1"):
        text = text[: -len("/api/v1")]
    return text


class Client:
    def __init__(self, url: str, token: str = "", *, timeout: float = DEFAULT_TIMEOUT,
                 profile: str = "default") -> None:
        self.url = site_url(url)
        self.token = token
        self.timeout = timeout
        self.profile = profile
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"{url!r} is not an http(s) URL of an RLark site "
                           "(for example https://rlark.example.com)")
        if parts.query or parts.fragment:
            raise CliError(f"the RLark URL {url!r} may not have a query or fragment")
        self.scheme = parts.scheme
        self.host = parts.hostname
        try:
            self.port = parts.port
        except ValueError:
            raise CliError(f"{url!r} has an invalid port") from None
        self.base_path = parts.path
        self._connection: Any = None
        self.warned = False

    # -- transport --------------------------------------------------------------------------

    def _connect(self) -> Any:
        import http.client

        if self._connection is None:
            if self.scheme == "https":
                import ssl

                self._connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout,
                    context=ssl.create_default_context())
            else:
                self._connection = http.client.HTTPConnection(self.host, self.port,
                                                              timeout=self.timeout)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def request(self, method: str, path: str, *, query: Any = None, json_body: Any = None,
                body: bytes | None = None, content_type: str | None = None,
                auth: bool = True, expect: tuple[int, ...] = (),
                accept: str = "application/json") -> Answer:
        """One request; an answer of 2xx (or a status in `expect`) is returned, any other is
        raised as a `CliError`. Errors are JSON whatever `accept` asks for."""
        target = self.base_path + API_PREFIX + path.lstrip("/")
        if query:
            target += "?" + urlencode(query, doseq=True)
        headers = {"Accept": accept, "User-Agent": "rlark-cli/"
                   + ".".join(map(str, API_VERSION))}
        language = accept_language()
        if language:
            headers["Accept-Language"] = language
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            content_type = "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        if auth and self.token:
            headers["Authorization"] = f"Token {self.token}"
        status, answer_headers, raw = self._send(method, target, body, headers)
        self._check_version(answer_headers, status, raw)
        data = self._decode(answer_headers, raw, status)
        answer = Answer(status=status, headers=answer_headers, data=data)
        if 200 <= status < 300 or status in expect:
            return answer
        raise self._error(method, path, answer)

    def _send(self, method: str, target: str, body: bytes | None,
              headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        import socket
        import ssl

        where = self.url
        for attempt in (1, 2):
            connection = self._connect()
            try:
                connection.request(method, target, body=body, headers=headers)
                response = connection.getresponse()
                raw = response.read(MAX_ANSWER_BYTES + 1)
                status = response.status
                answer_headers = {k.lower(): v for k, v in response.getheaders()}
                if response.will_close:
                    self.close()
                break
            except ssl.SSLError as error:
                self.close()
                raise CliError(f"TLS error talking to {where}: {error.reason or error}") from None
            except socket.gaierror:
                self.close()
                raise CliError(f"cannot resolve the host {self.host!r} of {where}: check the "
                               "URL (rlark login --url, or RLARK_URL)") from None
            except ConnectionRefusedError:
                self.close()
                raise CliError(f"cannot connect to {where}: connection refused (is RLark "
                               "running there?)") from None
            except TimeoutError:
                self.close()
                raise CliError(f"{where} did not answer within {self.timeout:g} s") from None
            except (ConnectionResetError, BrokenPipeError, OSError) as error:
                import http.client

                self.close()
                # a kept-alive connection the server closed meanwhile: once more, fresh
                if attempt == 1 and isinstance(error, (http.client.RemoteDisconnected,
                                                       ConnectionResetError, BrokenPipeError)) \
                        and method == "GET":
                    continue
                reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
                raise CliError(f"the connection to {where} failed: {reason}") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise CliError(f"{where} answered more than {MAX_ANSWER_BYTES >> 20} MiB; "
                           "refused")
        return status, answer_headers, raw

    # -- answers ----------------------------------------------------------------------------

    def _check_version(self, headers: dict[str, str], status: int, raw: bytes) -> None:
        version = headers.get(VERSION_HEADER.lower())
        if version is None:
            kind = headers.get("content-type", "")
            if "html" in kind or raw.lstrip()[:1] == b"<":
                raise CliError(
                    f"{self.url} answered an HTML page (HTTP {status}), not the RLark API: "
                    "check the URL, or a proxy or login page in between")
            raise CliError(f"{self.url} answered HTTP {status} without {VERSION_HEADER}: "
                           "it is not an RLark API (check the URL)")
        try:
            major, minor = (int(part) for part in version.strip().split(".", 1))
        except ValueError:
            raise CliError(f"{self.url} sent an unreadable {VERSION_HEADER}: "
                           f"{version[:40]!r}") from None
        mine = ".".join(map(str, API_VERSION))
        if major != API_VERSION[0]:
            raise CliError(f"the server speaks API {major}.{minor}; this rlark speaks {mine} "
                           f"and cannot use it: update rlark: {UPDATE_COMMAND}")
        if minor != API_VERSION[1] and not self.warned:
            self.warned = True
            newer = "newer" if minor > API_VERSION[1] else "older"
            advice = f"; update rlark: {UPDATE_COMMAND}" if minor > API_VERSION[1] else ""
            print(f"warning: the server's API {major}.{minor} is {newer} than this rlark's "
                  f"{mine}{advice}", file=sys.stderr)

    def _decode(self, headers: dict[str, str], raw: bytes, status: int) -> Any:
        kind = headers.get("content-type", "")
        if "json" in kind:
            try:
                return json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise CliError(f"{self.url} answered HTTP {status} with JSON that does not "
                               "parse") from None
        if "html" in kind:
            raise CliError(f"{self.url} answered an HTML page (HTTP {status}), not the RLark "
                           "API: check the URL, or a proxy in between")
        return raw.decode("utf-8", errors="replace")

    def _error(self, method: str, path: str, answer: Answer) -> CliError:
        data = answer.data if isinstance(answer.data, dict) else {}
        detail = one_line(str(data.get("detail") or "")) if data else ""
        status = answer.status
        if status == 401:
            source = "RLARK_TOKEN" if self.token and self._token_from_env() else \
                f"profile {self.profile!r}"
            if not self.token:
                return CliError(f"not logged in ({source} has no token): run `rlark login`")
            return CliError(f"the token of {source} was refused ({detail or 'HTTP 401'}): it "
                            "expired or was revoked; run `rlark login`")
        if status == 403:
            return CliError(f"permission denied: {detail or 'HTTP 403'}")
        if status == 404:
            return CliError(f"not found: {detail or path}", NOT_FOUND, body=data)
        if status == 413:
            return CliError(problem_line(data) or detail or "the request was too large",
                            USAGE, problem_lines(data), body=data)
        if status == 422:
            return CliError(detail or "blocked by findings", BLOCKED,
                            finding_lines(data.get("findings")), body=data)
        if status == 429:
            after = answer.headers.get("retry-after")
            return CliError(f"too many requests: {detail or 'HTTP 429'}"
                            + (f" (retry in {after} s)" if after else ""))
        if status >= 500:
            return CliError(f"the server failed on {method} {API_PREFIX}{path.lstrip('/')} "
                            f"(HTTP {status}{': ' + detail if detail else ''}); try again "
                            "later or tell its administrators")
        if "problems" in data:
            return CliError(problem_line(data) or detail, USAGE, problem_lines(data)[1:],
                            body=data)
        details = finding_lines(data.get("findings"))
        field = data.get("field")
        text = detail or f"HTTP {status}"
        if field and str(field) not in text:
            text = f"{field}: {text}"
        return CliError(text, USAGE, details, body=data)

    def _token_from_env(self) -> bool:
        import os

        return bool(os.environ.get("RLARK_TOKEN"))


def accept_language() -> str:
    """The server's messages (findings, details) in the user's language: `zh-Hans` for a
    Chinese locale (LC_ALL, LC_MESSAGES, LANG), else none (English)."""
    import os

    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        if value:
            return "zh-Hans" if value.lower().startswith("zh") else ""
    return ""


def one_line(text: str) -> str:
    return " ".join(text.split())


def _problem_text(problem: dict[str, Any]) -> str:
    parts = []
    if problem.get("line"):
        parts.append(f"line {problem['line']}, column {problem.get('column') or 1}")
    if problem.get("path"):
        parts.append(str(problem["path"]))
    parts.append(one_line(str(problem.get("message") or problem.get("code") or "")))
    return ": ".join(parts) + f" [{problem.get('code')}]"


def problem_line(data: dict[str, Any]) -> str:
    problems = data.get("problems") or []
    return _problem_text(problems[0]) if problems else ""


def problem_lines(data: dict[str, Any]) -> list[str]:
    return [_problem_text(p) for p in data.get("problems") or [] if isinstance(p, dict)]


def finding_lines(findings: Any, *, errors_only: bool = False) -> list[str]:
    lines = []
    for finding in findings or []:
        if not isinstance(finding, dict):
            continue
        if errors_only and finding.get("severity") != "error":
            continue
        where = finding.get("field") or finding.get("role") or ""
        message = one_line(str(finding.get("message", "")))
        lines.append(f"{finding.get('severity', '?')} {finding.get('code', '?')}"
                     + (f" {where}" if where else "") + f": {message}")
    return lines
