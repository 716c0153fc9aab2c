"""`python -m clusters.simulator --fleet FILE [--host H] [--port P] [--tick SECONDS]
[--state FILE] [--step-seconds SECONDS]`.

With `--state`, the Jobs are read from FILE at start and written back (within a second of
any change, and at shutdown), so a restarted simulator still has the Jobs it was given.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from clusters.simulator.core import StateFileError
from clusters.simulator.fleet import FleetError, load_fleet
from clusters.simulator.progress import DEFAULT_STEP_SECONDS
from clusters.simulator.schema import DEFAULT_CRD_PATH, REPOSITORY_ROOT
from clusters.simulator.server import DEFAULT_HOST, READY_PREFIX, start_simulator


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m clusters.simulator",
        description="Serve every cluster of a fleet file as a small Kubernetes API.",
    )
    parser.add_argument(
        "--fleet", type=Path, default=REPOSITORY_ROOT / "deploy" / "fleets" / "demo.yaml"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8700, help="0 picks a free port")
    parser.add_argument(
        "--tick", type=_seconds, default=2.0, help="controller interval in seconds; 0 disables it"
    )
    parser.add_argument("--crd", type=Path, default=DEFAULT_CRD_PATH, help="Job CRD to validate")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument(
        "--state", type=Path, help="keep the Jobs in this JSON file across restarts"
    )
    parser.add_argument(
        "--step-seconds", type=_positive, default=DEFAULT_STEP_SECONDS,
        help="seconds between the training steps a Running Head Task logs (default 5)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    try:
        fleet = load_fleet(arguments.fleet)
    except (FleetError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    try:
        running = start_simulator(
            fleet,
            host=arguments.host,
            port=arguments.port,
            tick_interval=arguments.tick or None,
            crd_path=arguments.crd,
            verbose=arguments.verbose,
            state=arguments.state,
            step_seconds=arguments.step_seconds,
        )
    except StateFileError as error:
        print(f"cannot read the state file: {error}", file=sys.stderr)
        return 2
    except (OSError, OverflowError) as error:
        print(f"cannot listen on {arguments.host}:{arguments.port}: {error}", file=sys.stderr)
        return 1
    simulator = running.simulator
    # The fleet's objects (a large fleet's are millions) live as long as the process: move
    # them out of the collector's reach, so a full collection while serving does not walk
    # them all again (at 200,000 pods, a pause of a second on every few hundred requests).
    gc.freeze()
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    print(
        f"{READY_PREFIX}{running.base_url} ({len(fleet.clusters)} clusters, "
        f"{fleet.node_count} nodes; Job schema: {running.simulator.job_schema.source})"
    )
    for cluster in fleet.clusters:
        auth = "bearer token required" if cluster.token else "no auth"
        print(
            f"  {cluster.name}: {running.base_url}/{cluster.name} "
            f"(namespace {cluster.namespace}, {auth})"
        )
    if arguments.state is not None:
        jobs = sum(len(c.job_items(None)) for c in simulator.clusters.values())
        print(f"  Jobs kept in {arguments.state} ({jobs} restored)")
    sys.stdout.flush()
    saved = simulator.version()
    while not stop.wait(1.0):
        if arguments.state is not None and simulator.version() != saved:
            saved = simulator.version()
            simulator.save_jobs(arguments.state)
    running.stop()
    if arguments.state is not None:
        simulator.save_jobs(arguments.state)
    print("fleet simulator stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
