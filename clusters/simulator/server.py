"""The simulator's HTTP server: one process, every cluster under `/<cluster name>`."""

from __future__ import annotations

import contextlib
import email.parser
import email.utils
import functools
import hmac
import json
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from clusters.simulator import api, control
from clusters.simulator.controller import ControllerThread
from clusters.simulator.core import Simulator
from clusters.simulator.faults import FaultAction
from clusters.simulator.fleet import CONTROL_SEGMENT, Fleet
from clusters.simulator.gpumetrics import CONTENT_TYPE as GPU_METRICS_TYPE
from clusters.simulator.objects import ApiError, EncodedJSON, failure_status, set_clock_offset
from clusters.simulator.progress import DEFAULT_STEP_SECONDS
from clusters.simulator.routing import Request, Response
from clusters.simulator.state import ClusterState

DEFAULT_HOST = "127.0.0.1"
READY_PREFIX = "fleet simulator serving on "
"""The CLI's first line starts with this, then the base URL (see `start_simulator_process`)."""

_API_ROUTER = api.build_router()
_CONTROL_ROUTER = control.build_router()


class SimulatorHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one `Simulator`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], simulator: Simulator, *, verbose: bool = False
    ) -> None:
        self.simulator = simulator
        self.verbose = verbose
        super().__init__(address, SimulatorRequestHandler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (timeouts in fault tests) are expected; only report real bugs."""
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class SimulatorRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimulatorHTTPServer
    timeout = 120
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls

    def parse_request(self) -> bool:
        """The request line and headers of an HTTP/1.1 request, the headers set into the
        handler's `MessageClass` as `http.client.parse_headers` sets them, without the email
        package's feed parser (a tenth of a log read's time here); anything else (another
        version, a folded or malformed header line) is parsed by the standard library."""
        raw: bytes = getattr(self, "raw_requestline")  # noqa: B009 (set by the base class)
        requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if len(words) != 3 or words[2] != "HTTP/1.1" or words[1].startswith("//"):
            return super().parse_request()
        lines = _header_lines(self.rfile)
        if isinstance(lines, str):
            self.command, self.requestline = "", requestline
            self.request_version, self.close_connection = "HTTP/1.1", True
            self.send_error(431, lines)
            return False
        self.command, self.path, self.request_version = words
        self.requestline, self.close_connection = requestline, False
        self.headers = _headers(lines, self.MessageClass)
        if self.headers.get("Connection", "").lower() == "close":
            self.close_connection = True
        if self.headers.get("Expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header's text, made once a second."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return _http_date(int(time.time()))

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _request(self, path: str) -> Request:
        query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        return Request(
            method=self.command,
            path=path,
            query={key: values[-1] for key, values in query.items()},
            body=self._read_body(),
            headers={key.lower(): value for key, value in self.headers.items()},
        )

    def _serve(self) -> None:
        segments = unquote(urlsplit(self.path).path).strip("/").split("/", 1)
        head, rest = segments[0], "/" + (segments[1] if len(segments) > 1 else "")
        request = self._request(rest)
        simulator = self.server.simulator
        if head == CONTROL_SEGMENT:
            self._write(_respond(lambda: _CONTROL_ROUTER.dispatch(simulator, request)))
        elif head in simulator.clusters and rest.rstrip("/") == "/metrics" \
                and request.method == "GET":
            # The cluster's DCGM-exporter-like GPU gauges, for a Prometheus to scrape: not the
            # Kubernetes API (no token, no faults).
            self._write(Response(200, simulator.gpu_metrics(head), headers=[
                ("Content-Type", GPU_METRICS_TYPE)]))
        elif head in simulator.clusters:
            self._serve_cluster(simulator.clusters[head], request)
        else:
            known = ", ".join(sorted(simulator.clusters))
            message = f'no cluster named "{head}"; clusters: {known}'
            self._write(_status_response(ApiError(404, message)))

    def _serve_cluster(self, cluster: ClusterState, request: Request) -> None:
        """Apply the cluster's faults, then answer through the API router.

        A request delayed past a `reset` is dropped unanswered, so that it cannot
        change (or log into) the state the reset started.
        """
        entry: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "fault": None,
            "code": None,
        }
        epoch = cluster.log_request(entry)
        if cluster.faults.latency_seconds:
            self.server.simulator.stopping.wait(cluster.faults.latency_seconds)
        if cluster.epoch != epoch:
            self._drop()
            return
        action = cluster.faults.decide()
        entry["fault"] = action.value if action else None
        response = self._cluster_response(cluster, request, action)
        if response is None or action is FaultAction.DROP_AFTER:
            self._drop()
            return
        entry["code"] = response.code
        self._write(response)

    def _cluster_response(
        self, cluster: ClusterState, request: Request, action: FaultAction | None
    ) -> Response | None:
        """The answer to send, or None to close the connection without one."""
        simulator = self.server.simulator
        if action is FaultAction.ERROR:
            return _status_response(ApiError(500, "simulated server error"))
        if action is FaultAction.THROTTLE:
            response = _status_response(ApiError(429, "simulated throttling"))
            response.headers.append(("Retry-After", "1"))
            return response
        if action is FaultAction.TIMEOUT:
            simulator.stopping.wait(cluster.faults.spec.hang_seconds)
            return None
        if action is FaultAction.DROP:
            return None
        context = api.ClusterContext(cluster=cluster, schema=simulator.job_schema)
        return _respond(lambda: _authorized_dispatch(cluster, context, request))

    def _drop(self) -> None:
        """Close the connection without answering."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _write(self, response: Response) -> None:
        document = response.document
        content_type = "application/json"
        if isinstance(document, EncodedJSON):
            payload = document.body
        elif isinstance(document, str):
            payload, content_type = document.encode(), "text/plain"
        else:
            payload = json.dumps(document).encode()
        named = {name.lower() for name, _value in response.headers}
        self.send_response(response.code)
        if "content-type" not in named:
            self.send_header("Content-Type", content_type)
        if response.stream is None:
            self.send_header("Content-Length", str(len(payload)))
        else:
            self.send_header("Connection", "close")
        for name, value in response.headers:
            self.send_header(name, value)
        if response.stream is None:  # the headers and the body in one write (one segment)
            buffered: list[bytes] = getattr(self, "_headers_buffer")  # noqa: B009 (the base's)
            buffered.append(b"\r\n" + payload)
            self.flush_headers()
            return
        self.end_headers()
        self.wfile.write(payload)
        self._follow(*response.stream)

    def _follow(self, more: Callable[[], str], seconds: float) -> None:
        """Send new text every tenth of a second for `seconds`, then close the connection."""
        self.close_connection = True
        deadline = time.monotonic() + seconds
        stopping = self.server.simulator.stopping
        while time.monotonic() < deadline and not stopping.wait(0.1):
            text = more()
            if text:
                self.wfile.write(text.encode())
                self.wfile.flush()


_MAX_HEADER_LINE = 65536
_MAX_HEADERS = 100


def _header_lines(rfile: Any) -> list[bytes] | str:
    """The header lines up to the blank one, or why they are refused (http.client's bounds:
    a line of at most 64 KiB, at most 100 headers)."""
    lines: list[bytes] = []
    while True:
        line = rfile.readline(_MAX_HEADER_LINE + 1)
        if len(line) > _MAX_HEADER_LINE:
            return "Line too long"
        if line in (b"\r\n", b"\n", b""):
            return lines
        lines.append(line)
        if len(lines) > _MAX_HEADERS:
            return "Too many headers"


def _headers(lines: list[bytes], message_class: Any) -> Any:
    """The header lines as `http.client.parse_headers` gives them: each `Name: value` set raw
    (the value's leading blanks and the line end stripped, as the compat32 policy does); a
    line of another shape goes to the email package's parser with the rest."""
    texts = [line.decode("iso-8859-1") for line in lines]
    headers = message_class()
    for text in texts:
        name, colon, value = text.partition(":")
        if not colon or not name or name[0] in " \t" or name != name.rstrip(" \t"):
            return email.parser.Parser(_class=message_class).parsestr("".join(texts))
        headers.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
    return headers


@functools.lru_cache(maxsize=2)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


def _status_response(error: ApiError) -> Response:
    return Response(error.code, error.to_status())


def _authorized_dispatch(
    cluster: ClusterState, context: api.ClusterContext, request: Request
) -> Response:
    token = cluster.spec.token
    if token is not None:
        offered = request.headers.get("authorization", "")
        if not hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
            raise ApiError(401, "Unauthorized")
    return _API_ROUTER.dispatch(context, request)


def _respond(handle: Callable[[], Response]) -> Response:
    """Run a handler; `ApiError` becomes its Status, anything else a 500 Status."""
    try:
        response = handle()
    except ApiError as error:
        return _status_response(error)
    except Exception as error:  # a simulator bug must still answer, not hang the client
        traceback.print_exc()
        status = failure_status(code=500, reason="InternalError", message=repr(error))
        return Response(500, status)
    return response


class RunningSimulator:
    """A started server plus (optionally) the controller thread; `stop()` ends both."""

    def __init__(self, server: SimulatorHTTPServer, tick_interval: float | None) -> None:
        self.server = server
        self.simulator = server.simulator
        self._serving = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._controller = (
            ControllerThread(tick=self.simulator.tick, interval=tick_interval)
            if tick_interval
            else None
        )

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def start(self) -> RunningSimulator:
        self._serving.start()
        if self._controller is not None:
            self._controller.start()
        return self

    def stop(self) -> None:
        self.simulator.stopping.set()
        if self._controller is not None:
            self._controller.stop()
        self.server.shutdown()
        self.server.server_close()
        self._serving.join(timeout=5)
        set_clock_offset(0)  # the next simulator of this process starts on the real time


def start_simulator(
    fleet: Fleet,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    tick_interval: float | None = None,
    crd_path: Path | None = None,
    verbose: bool = False,
    state: Path | None = None,
    step_seconds: float = DEFAULT_STEP_SECONDS,
) -> RunningSimulator:
    """Bind the server (port 0 picks a free port) and start serving in background threads.

    With `state`, the Jobs saved there (`Simulator.save_jobs`) are back before the first
    request; an unreadable file raises `StateFileError` before anything listens.
    """
    set_clock_offset(0)  # a new simulator starts on the real time
    simulator = Simulator(fleet, crd_path=crd_path, step_seconds=step_seconds)
    if state is not None:
        simulator.load_jobs(state)
    server = SimulatorHTTPServer((host, port), simulator, verbose=verbose)
    return RunningSimulator(server, tick_interval).start()
