"""Helpers for tests and demos: run the simulator in-process or as a subprocess, steer it.

Both handles expose the same methods: `base_url`, `cluster_url(name)`,
`credentials(name)` (for the gateway), and wrappers around the `/_control/`
endpoint (`set_faults`, `patch_node`, `set_job_phase`, `tick`, ...).
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from clusters.k8s import Credentials
from clusters.simulator.fleet import Fleet, load_fleet, parse_fleet
from clusters.simulator.progress import DEFAULT_STEP_SECONDS
from clusters.simulator.schema import REPOSITORY_ROOT
from clusters.simulator.server import (
    DEFAULT_HOST,
    READY_PREFIX,
    RunningSimulator,
    start_simulator,
)

DEMO_FLEET_PATH = REPOSITORY_ROOT / "deploy" / "fleets" / "demo.yaml"


class ControlError(RuntimeError):
    """The control endpoint refused a request; `status` is the Status object it answered."""

    def __init__(self, code: int, status: Any) -> None:
        message = status.get("message") if isinstance(status, dict) else status
        super().__init__(f"{code}: {message}")
        self.code = code
        self.status = status


def _fleet(fleet: Fleet | dict[str, Any] | str | Path) -> Fleet:
    if isinstance(fleet, Fleet):
        return fleet
    if isinstance(fleet, dict):
        return parse_fleet(fleet)
    return load_fleet(fleet)


class SimulatorHandle(ABC):
    """A running simulator reachable at `base_url`, serving the clusters of `fleet`."""

    def __init__(self, *, base_url: str, fleet: Fleet) -> None:
        self.base_url = base_url
        self.fleet = fleet

    def cluster_url(self, name: str) -> str:
        """The cluster's API base URL (the `kubernetes` client's `host`)."""
        self.fleet.cluster(name)
        return f"{self.base_url}/{name}"

    def credentials(self, name: str, *, token: str | None = None) -> Credentials:
        """Gateway credentials for a cluster; `token` overrides the fleet's token."""
        return Credentials(
            api_url=self.cluster_url(name), token=token or self.fleet.cluster(name).token
        )

    def control(self, method: str, path: str, body: Any = None) -> Any:
        """Call `/_control/<path>` and return the decoded JSON; non-2xx raises `ControlError`."""
        parts = urlsplit(self.base_url)
        connection = http.client.HTTPConnection(parts.hostname or DEFAULT_HOST, parts.port, 10)
        try:
            payload = None if body is None else json.dumps(body)
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            connection.request(method, "/_control/" + path.lstrip("/"), payload, headers)
            response = connection.getresponse()
            document = json.loads(response.read() or b"null")
        finally:
            connection.close()
        if not 200 <= response.status < 300:
            raise ControlError(response.status, document)
        return document

    def _cluster_path(self, cluster: str, *rest: str) -> str:
        return "/".join(["clusters", quote(cluster, safe=""), *(quote(p, safe="") for p in rest)])

    def set_faults(self, cluster: str, **faults: Any) -> dict[str, Any]:
        """Replace the cluster's faults (see docs/simulator.md for the keys)."""
        return dict(self.control("PUT", self._cluster_path(cluster, "faults"), faults))

    def clear_faults(self, cluster: str) -> None:
        self.control("DELETE", self._cluster_path(cluster, "faults"))

    def add_node(
        self,
        cluster: str,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, int | str] | None = None,
        ready: bool = True,
    ) -> dict[str, Any]:
        body = {
            "name": name,
            "labels": labels or {},
            "allocatable": allocatable or {},
            "ready": ready,
        }
        return dict(self.control("POST", self._cluster_path(cluster, "nodes"), body))

    def patch_node(
        self,
        cluster: str,
        node: str,
        *,
        labels: dict[str, str | None] | None = None,
        allocatable: dict[str, int | str | None] | None = None,
        ready: bool | None = None,
    ) -> dict[str, Any]:
        """Merge label/allocatable changes into a node (a None value removes the key)."""
        body: dict[str, Any] = {}
        if labels is not None:
            body["labels"] = labels
        if allocatable is not None:
            body["allocatable"] = allocatable
        if ready is not None:
            body["ready"] = ready
        return dict(self.control("PATCH", self._cluster_path(cluster, "nodes", node), body))

    def remove_node(self, cluster: str, node: str) -> None:
        self.control("DELETE", self._cluster_path(cluster, "nodes", node))

    def add_pod(
        self,
        cluster: str,
        name: str,
        *,
        node: str,
        requests: dict[str, int | str],
        namespace: str | None = None,
        init_requests: dict[str, int | str] | None = None,
        overhead: dict[str, int | str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Bind a foreign workload's pod to `node` (see docs/simulator.md); returns the pod."""
        body: dict[str, Any] = {"name": name, "node": node, "requests": requests}
        for key, value in (("namespace", namespace), ("init_requests", init_requests),
                           ("overhead", overhead), ("labels", labels)):
            if value is not None:
                body[key] = value
        return dict(self.control("POST", self._cluster_path(cluster, "pods"), body))

    def remove_pod(self, cluster: str, name: str) -> None:
        """Delete a foreign pod (its capacity is free again)."""
        self.control("DELETE", self._cluster_path(cluster, "pods", name))

    def set_job_phase(
        self,
        cluster: str,
        namespace: str,
        name: str,
        phase: str,
        *,
        reason: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Force a Job's phase (`Succeeded`, `Failed`, ...); returns the updated Job."""
        body: dict[str, Any] = {"phase": phase}
        if reason is not None:
            body["reason"] = reason
        if message is not None:
            body["message"] = message
        path = self._cluster_path(cluster, "namespaces", namespace, "jobs", name, "phase")
        return dict(self.control("POST", path, body))

    def evict_workload(self, cluster: str, namespace: str, name: str, *,
                       cause: str | None = None) -> dict[str, Any]:
        """Deactivate a Kueue Workload (`spec.active: false`; `cause`: one of Kueue's own,
        `RequeuingLimitExceeded` or `MaximumExecutionTimeExceeded`); returns the Workload."""
        path = self._cluster_path(cluster, "namespaces", namespace, "workloads", name, "evict")
        return dict(self.control("POST", path, {} if cause is None else {"cause": cause}))

    def activate_workload(self, cluster: str, namespace: str, name: str) -> dict[str, Any]:
        """Reactivate a deactivated Kueue Workload; returns the Workload."""
        path = self._cluster_path(cluster, "namespaces", namespace, "workloads", name,
                                  "activate")
        return dict(self.control("POST", path))

    def patch_pod(self, cluster: str, namespace: str, pod: str, **fields: Any) -> dict[str, Any]:
        """Set a pod's `phase`, `restarts`, `waiting`, `terminated` or `lastTerminated`
        (see docs/simulator.md); returns the pod."""
        path = self._cluster_path(cluster, "namespaces", namespace, "pods", pod)
        return dict(self.control("PATCH", path, fields))

    def evict_pod(self, cluster: str, namespace: str, pod: str, **pressure: Any) -> dict[str, Any]:
        """The kubelet evicts a running pod (`resource`, `threshold`, `available`, `usage`: see
        docs/simulator.md); returns the pod."""
        path = self._cluster_path(cluster, "namespaces", namespace, "pods", pod, "evict")
        return dict(self.control("POST", path, pressure))

    def preempt_pod(self, cluster: str, namespace: str, pod: str, *,
                    preemptor: str = "high-priority") -> dict[str, Any]:
        """kube-scheduler preempts a running pod for `preemptor`; returns the pod."""
        path = self._cluster_path(cluster, "namespaces", namespace, "pods", pod, "preempt")
        return dict(self.control("POST", path, {"preemptor": preemptor}))

    def append_pod_log(
        self, cluster: str, namespace: str, pod: str, lines: list[str], *, previous: bool = False
    ) -> int:
        """Append lines to a pod's current (or previous) container log; returns its length."""
        path = self._cluster_path(cluster, "namespaces", namespace, "pods", pod, "log")
        return int(self.control("POST", path, {"lines": lines, "previous": previous})["lines"])

    def set_progress(self, cluster: str, namespace: str, name: str, *, state: str | None = None,
                     step_seconds: float | None = None,
                     total: int | None = None) -> dict[str, Any]:
        """Freeze (`state="frozen"`) or resume (`"advancing"`) a Job's step lines, or change
        their pace or total; returns `{state, step_seconds, step, total}`."""
        body: dict[str, Any] = {}
        if state is not None:
            body["state"] = state
        if step_seconds is not None:
            body["step_seconds"] = step_seconds
        if total is not None:
            body["total"] = total
        path = self._cluster_path(cluster, "namespaces", namespace, "jobs", name, "progress")
        return dict(self.control("POST", path, body))

    def set_pod_gpu(self, cluster: str, namespace: str, pod: str, **gauges: Any
                    ) -> dict[str, Any]:
        """Set a pod's DCGM gauges (`utilization`, `tensor_active`, None for absent)."""
        path = self._cluster_path(cluster, "namespaces", namespace, "pods", pod, "gpu")
        return dict(self.control("PUT", path, gauges))

    def metrics(self, cluster: str) -> str:
        """The cluster's `/metrics` text (the DCGM-like GPU gauges)."""
        parts = urlsplit(self.base_url)
        connection = http.client.HTTPConnection(parts.hostname or DEFAULT_HOST, parts.port, 10)
        try:
            connection.request("GET", f"/{cluster}/metrics")
            return connection.getresponse().read().decode()
        finally:
            connection.close()

    def set_clock_offset(self, seconds: float) -> str:
        """Move the simulator's clock to the real time plus `seconds` (negative: behind it);
        moving it forward is that much time passing at once. Returns the simulator's now."""
        return str(self.control("PUT", "clock", {"offset_seconds": seconds})["now"])

    def clock_offset(self) -> float:
        """The simulator's clock against the real one, in seconds."""
        return float(self.control("GET", "clock")["offset_seconds"])

    def advance_clock(self, seconds: float) -> str:
        """`seconds` pass at once on the simulator's clock (its offset moved forward by them);
        returns the simulator's now."""
        return self.set_clock_offset(self.clock_offset() + seconds)

    def tick(self) -> int:
        """Run one controller pass now; returns how many Jobs changed."""
        return int(self.control("POST", "tick")["changed"])

    def reset(self) -> None:
        self.control("POST", "reset")

    def created_bodies(self, cluster: str) -> list[dict[str, Any]]:
        """Every Job create the cluster received: namespace, body as sent, code, pruned fields."""
        return list(self.control("GET", self._cluster_path(cluster, "creates")))

    def requests(self, cluster: str) -> list[dict[str, Any]]:
        """The cluster's recent API requests: method, path, query, fault, code."""
        return list(self.control("GET", self._cluster_path(cluster, "requests")))

    @abstractmethod
    def stop(self) -> None:
        """Shut the simulator down."""

    def __enter__(self) -> SimulatorHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class InProcessSimulator(SimulatorHandle):
    """A simulator served by background threads of this process."""

    def __init__(self, running: RunningSimulator, fleet: Fleet) -> None:
        super().__init__(base_url=running.base_url, fleet=fleet)
        self.running = running

    def stop(self) -> None:
        self.running.stop()


@contextmanager
def run_simulator(
    fleet: Fleet | dict[str, Any] | str | Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    tick_interval: float | None = None,
    crd_path: Path | None = None,
    step_seconds: float = DEFAULT_STEP_SECONDS,
) -> Iterator[InProcessSimulator]:
    """Serve `fleet` (a document, a path or a `Fleet`) in this process for the `with` block.

    Without `tick_interval` the controller only runs when `tick()` is called,
    which keeps tests deterministic. `step_seconds` is the Head Tasks' pace of step lines
    (one Job's is set with `set_progress`).
    """
    parsed = _fleet(fleet)
    running = start_simulator(
        parsed, host=host, port=port, tick_interval=tick_interval, crd_path=crd_path,
        step_seconds=step_seconds,
    )
    handle = InProcessSimulator(running, parsed)
    try:
        yield handle
    finally:
        handle.stop()


class SimulatorProcess(SimulatorHandle):
    """A simulator running as `python -m clusters.simulator` in a child process."""

    def __init__(self, process: subprocess.Popen[str], base_url: str, fleet: Fleet) -> None:
        super().__init__(base_url=base_url, fleet=fleet)
        self.process = process

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait for the clean exit, SIGKILL if it does not come."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)


def _pump_lines(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _await_ready(process: subprocess.Popen[str], deadline: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump_lines, args=(process.stdout, lines), daemon=True).start()
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            if process.poll() is not None:
                raise RuntimeError(f"simulator exited with {process.returncode}") from None
            continue
        if line.startswith(READY_PREFIX):
            return line[len(READY_PREFIX) :].split()[0]
    raise TimeoutError("the simulator did not report readiness in time")


def start_simulator_process(
    fleet_path: str | Path,
    port: int = 0,
    *,
    host: str = DEFAULT_HOST,
    tick_interval: float | None = None,
    crd_path: Path | None = None,
    state: Path | None = None,
    timeout: float = 20.0,
    step_seconds: float | None = None,
) -> SimulatorProcess:
    """Start the simulator CLI in a child process and wait until it answers.

    `port=0` lets the child pick a free port; the handle's `base_url` tells which.
    """
    command = [sys.executable, "-m", "clusters.simulator", "--fleet", str(fleet_path)]
    command += ["--host", host, "--port", str(port), "--tick", str(tick_interval or 0)]
    if crd_path is not None:
        command += ["--crd", str(crd_path)]
    if state is not None:
        command += ["--state", str(state)]
    if step_seconds is not None:
        command += ["--step-seconds", str(step_seconds)]
    inherited = os.environ.get("PYTHONPATH")
    paths = [str(REPOSITORY_ROOT), *([inherited] if inherited else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        fleet = load_fleet(fleet_path)  # read here while the child reads it too
        base_url = _await_ready(process, time.monotonic() + timeout)
        handle = SimulatorProcess(process, base_url, fleet)
        handle.control("GET", "health")
    except BaseException:
        process.kill()
        process.wait()
        raise
    return handle


def task_body(
    name: str,
    *,
    replicas: int,
    selector: dict[str, str],
    gpus: int = 0,
    devices: dict[str, int] | None = None,
    head: bool = False,
    image: str = "registry.example.com/rlinf/rlinf:test",
) -> dict[str, Any]:
    """A minimal task of an `rlinf.io/v1alpha1` Job, for tests of the API and the controller."""
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus} if gpus else {}
    limits.update(devices or {})
    container: dict[str, Any] = {"name": "main", "image": image}
    if limits:
        container["resources"] = {"limits": limits}
    return {
        "name": name,
        "head": head,
        "replicas": replicas,
        "template": {"spec": {"nodeSelector": dict(selector), "containers": [container]}},
    }


def job_body(
    name: str, *, tasks: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    """A minimal Job body around `tasks` (see `task_body`); `minAvailable` sums the replicas."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"minAvailable": sum(task["replicas"] for task in tasks), "tasks": tasks},
    }


TEST_JOB_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobs.rlinf.io"},
    "spec": {
        "group": "rlinf.io",
        "names": {"kind": "Job", "plural": "jobs", "singular": "job", "listKind": "JobList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "required": ["tasks"],
                                "properties": {
                                    "minAvailable": {"type": "integer"},
                                    "networkDomain": {"type": "string", "nullable": True},
                                    "tasks": {
                                        "type": "array",
                                        "minItems": 1,
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "type": "object",
                                            "required": ["name", "replicas", "template"],
                                            "properties": {
                                                "name": {
                                                    "type": "string",
                                                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                                },
                                                "head": {"type": "boolean", "default": False},
                                                "replicas": {"type": "integer", "minimum": 1},
                                                "template": {
                                                    "type": "object",
                                                    "x-kubernetes-preserve-unknown-fields": True,
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}
"""A small structural CRD for tests: known task fields, a default, a nullable field."""
