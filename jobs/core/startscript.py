"""The start script RLark puts in place of every worker container's command.

One script per Task, shown in the YAML preview and run as ``bash -c <script>``:

1. identity and rank: validates ``RLINF_TASK_INDEX`` (this pod's replica index, set by
   the controller), then exports RLark's ``RLINF_*`` variables (read-only from then on);
2. SSH public keys into ``~/.ssh/authorized_keys`` (a failure is logged, not fatal);
3. the role's prepare script, *sourced* so that what it exports (venv activation, ...)
   is in place before ``ray start`` captures the environment;
4. (status 127 at once when there is no ``ray`` command) ``ray start --head`` on the Head
   Task; workers wait for the head, then
   ``exec ray start --address=<head>:6379 --block``;
5. Head Task only: a ``python`` check that waits until every expected Ray node has
   joined, and logs a warning and continues on timeout or failure;
6. Head Task only: ``exec bash`` on the run script.

User text is embedded so it cannot leave its place: scripts go into files through
quoted here-documents whose delimiter is derived from the content and guaranteed not
to occur as a line of it; every other value is quoted with `shlex.quote`.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CLUSTER_CHECK_TIMEOUT_ENV",
    "DEFAULT_TIMEOUT_SECONDS",
    "HEAD_WAIT_TIMEOUT_ENV",
    "MAX_START_SCRIPT_BYTES",
    "RAY_PORT",
    "RAY_TEMP_DIR_ENV",
    "RESERVED_ENV_NAMES",
    "TASK_INDEX_ENV",
    "TUNABLE_ENV_NAMES",
    "TaskPlan",
    "build_start_script",
    "head_address",
    "heredoc_delimiter",
    "rank_offsets",
]

RAY_PORT = 6379
TASK_INDEX_ENV = "RLINF_TASK_INDEX"
RAY_TEMP_DIR_ENV = "RAY_TEMP_DIR"
CLUSTER_CHECK_TIMEOUT_ENV = "RLINF_CLUSTER_CHECK_TIMEOUT"
HEAD_WAIT_TIMEOUT_ENV = "RLINF_HEAD_WAIT_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 600
# Whole seconds; a user may set these in a role's env to change the defaults.
TUNABLE_ENV_NAMES = (CLUSTER_CHECK_TIMEOUT_ENV, HEAD_WAIT_TIMEOUT_ENV)
# Linux refuses a single exec argument of 128 KiB or more (MAX_ARG_STRLEN, NUL included).
MAX_START_SCRIPT_BYTES = 128 * 1024 - 1

_EXPORTED = (
    "RLINF_JOB_NAME",
    "RLINF_ROLE_NAME",
    "RLINF_TASK_NAME",
    "RLINF_TASK_REPLICAS",
    "RLINF_IS_HEAD",
    "RLINF_NUM_NODES",
    "RLINF_NODE_RANK",
    "RLINF_HEAD_ADDRESS",
)
# Names the start script sets itself (or that change how bash runs it): users may not set them.
RESERVED_ENV_NAMES = frozenset(
    {
        TASK_INDEX_ENV,
        *_EXPORTED,
        "RAY_ADDRESS",
        "RLARK_SCRIPT_DIR",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
    }
)

_CLUSTER_CHECK = """\
import os
import sys
import time

import ray

expected = int(os.environ["RLINF_NUM_NODES"])
timeout = float(os.environ["RLINF_CLUSTER_CHECK_TIMEOUT"])
ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
deadline = time.monotonic() + timeout
while True:
    alive = sum(1 for node in ray.nodes() if node.get("Alive"))
    if alive >= expected:
        print(f"rlark: cluster check passed: {alive}/{expected} Ray nodes", file=sys.stderr)
        break
    if time.monotonic() >= deadline:
        print(
            f"rlark: WARNING: only {alive}/{expected} Ray nodes after {timeout:g}s; continuing",
            file=sys.stderr,
        )
        break
    time.sleep(5)
ray.shutdown()
"""


@dataclass(frozen=True)
class TaskPlan:
    """What one Task's start script needs to know about the job (all decided at render time)."""

    job_name: str
    role_name: str
    task_name: str
    head: bool
    replicas: int
    rank_offset: int  # RLINF_NODE_RANK of replica 0
    total_nodes: int  # the sum of all Tasks' replicas
    head_address: str  # DNS name of the Head Task's replica 0


def rank_offsets(*, replicas: Sequence[int], head_index: int | None) -> list[int]:
    """The rank of replica 0 of each task: the Head Task first (rank 0), then the other
    tasks in role order, each task's replicas in index order."""
    offsets = [0] * len(replicas)
    following = replicas[head_index] if head_index is not None else 0
    for index, count in enumerate(replicas):
        if index == head_index:
            continue
        offsets[index] = following
        following += count
    return offsets


def head_address(*, job_name: str, head_task: str, network_domain: str) -> str:
    """``<job>-<head task>-0.<job>``, plus ``.<network domain>`` when the job has one.

    The controller's contract: every pod gets the hostname ``<job>-<task>-<index>`` under a
    headless service named ``<job>`` that publishes not-ready addresses; with a network
    domain, that name is also resolvable as ``<host>.<job>.<domain>`` in every cluster of
    the domain.
    """
    address = f"{job_name}-{head_task}-0.{job_name}"
    return f"{address}.{network_domain}" if network_domain else address


def heredoc_delimiter(*, label: str, content: str) -> str:
    """A here-document delimiter that is not a line of `content` (bash splits on ``\\n``)."""
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    lines = set(content.split("\n"))
    candidate = f"RLARK_{label}_{digest}"
    attempt = 0
    while candidate in lines:
        attempt += 1
        candidate = f"RLARK_{label}_{digest}_{attempt}"
    return candidate


def _file_from_heredoc(*, path: str, label: str, content: str) -> list[str]:
    body = content if content.endswith("\n") else content + "\n"
    delimiter = heredoc_delimiter(label=label, content=body)
    return [f"cat > {path} <<'{delimiter}'", body + delimiter]


def _identity(plan: TaskPlan) -> list[str]:
    last = plan.replicas - 1
    values = {
        "RLINF_JOB_NAME": shlex.quote(plan.job_name),
        "RLINF_ROLE_NAME": shlex.quote(plan.role_name),
        "RLINF_TASK_NAME": shlex.quote(plan.task_name),
        "RLINF_TASK_REPLICAS": str(plan.replicas),
        "RLINF_IS_HEAD": "1" if plan.head else "0",
        "RLINF_NUM_NODES": str(plan.total_nodes),
        "RLINF_NODE_RANK": f"$(( {plan.rank_offset} + RLINF_TASK_INDEX ))",
        "RLINF_HEAD_ADDRESS": shlex.quote(plan.head_address),
    }
    return [
        "# 1. Identity and rank. The controller sets RLINF_TASK_INDEX to this pod's replica index.",
        'case "${RLINF_TASK_INDEX:-}" in',
        "  '' | *[!0-9]*)",
        f'    rlark_log "RLINF_TASK_INDEX must be a replica index 0..{last}"',
        "    exit 64 ;;",
        "esac",
        f"if (( ${{#RLINF_TASK_INDEX}} > 9 || 10#${{RLINF_TASK_INDEX}} > {last} )); then",
        f'  rlark_log "RLINF_TASK_INDEX=${{RLINF_TASK_INDEX}} is outside 0..{last}"',
        "  exit 64",
        "fi",
        "export RLINF_TASK_INDEX=$(( 10#${RLINF_TASK_INDEX} ))",
        *(f"export {name}={values[name]}" for name in _EXPORTED),
        f"readonly {TASK_INDEX_ENV} {' '.join(_EXPORTED)}",
        'rlark_log "task ${RLINF_TASK_NAME} replica ${RLINF_TASK_INDEX}:'
        ' RLINF_NODE_RANK=${RLINF_NODE_RANK} of ${RLINF_NUM_NODES}"',
    ]


def _authorized_keys(ssh_keys: Sequence[str]) -> list[str]:
    if not ssh_keys:
        return []
    quoted = " \\\n".join(f"    {shlex.quote(key)}" for key in ssh_keys)
    return [
        "# 2. SSH public keys (every pod of every role).",
        'rlark_ssh="${HOME:-/root}/.ssh"',
        "if ! (umask 077 && mkdir -p \"${rlark_ssh}\" && printf '%s\\n' \\",
        quoted + " \\",
        '    > "${rlark_ssh}/authorized_keys"); then',
        '  rlark_log "warning: could not write ${rlark_ssh}/authorized_keys; continuing"',
        "fi",
    ]


def _script_files(*, prepare_script: str, run_script: str | None) -> list[str]:
    if not prepare_script.strip() and run_script is None:
        return []
    lines = [
        "# The user's scripts, verbatim, into files of their own.",
        'RLARK_SCRIPT_DIR="$(mktemp -d)"',
        "readonly RLARK_SCRIPT_DIR",
    ]
    if prepare_script.strip():
        path = '"${RLARK_SCRIPT_DIR}/prepare.sh"'
        lines += _file_from_heredoc(path=path, label="PREPARE", content=prepare_script)
    if run_script is not None:
        path = '"${RLARK_SCRIPT_DIR}/run.sh"'
        lines += _file_from_heredoc(path=path, label="RUN", content=run_script)
    return lines


def _prepare(prepare_script: str) -> list[str]:
    if not prepare_script.strip():
        return ["# 3. No prepare script for this role."]
    return [
        "# 3. Prepare script, sourced (without nounset) so its exports reach ray start.",
        "set +u",
        '. "${RLARK_SCRIPT_DIR}/prepare.sh"',
        "set -euo pipefail",
    ]


_RAY_CLI_CHECK = (
    "command -v ray >/dev/null 2>&1 || "
    "{ rlark_log 'error: no ray command on PATH (the image needs the Ray CLI, Ray >= 2.47)'; "
    "exit 127; }"
)


def _ray(plan: TaskPlan, ray_temp_dir: bool) -> list[str]:
    temp_dir = f' --temp-dir="${{{RAY_TEMP_DIR_ENV}}}"' if ray_temp_dir else ""
    address = f'"${{RLINF_HEAD_ADDRESS}}:{RAY_PORT}"'
    if plan.head:
        return [
            "# 4. Ray head.",
            _RAY_CLI_CHECK,
            f"ray start --head --port={RAY_PORT} --disable-usage-stats{temp_dir}",
            f"export RAY_ADDRESS={address}",
        ]
    timeout = f"${{{HEAD_WAIT_TIMEOUT_ENV}:-{DEFAULT_TIMEOUT_SECONDS}}}"
    return [
        f"# 4. Wait for the Ray head ({HEAD_WAIT_TIMEOUT_ENV} seconds at most), join it, block.",
        _RAY_CLI_CHECK,
        f"rlark_deadline=$(( SECONDS + {timeout} ))",
        f"until ray health-check --address={address} >/dev/null 2>&1; do",
        "  if (( SECONDS >= rlark_deadline )); then",
        f'    rlark_log "warning: no Ray head at ${{RLINF_HEAD_ADDRESS}} after {timeout}s;'
        ' joining anyway"',
        "    break",
        "  fi",
        "  sleep 5",
        "done",
        f"exec ray start --address={address} --block{temp_dir}",
    ]


def _cluster_check_and_run() -> list[str]:
    timeout = f"${{{CLUSTER_CHECK_TIMEOUT_ENV}:-{DEFAULT_TIMEOUT_SECONDS}}}"
    return [
        "# 5. Cluster check: wait for RLINF_NUM_NODES Ray nodes; warn and continue on timeout.",
        f'export {CLUSTER_CHECK_TIMEOUT_ENV}="{timeout}"',
        "if ! python - <<'RLARK_CLUSTER_CHECK'",
        _CLUSTER_CHECK + "RLARK_CLUSTER_CHECK",
        "then",
        '  rlark_log "warning: the Ray cluster check did not pass; running the run script anyway"',
        "fi",
        "# 6. Run script. It starts where the prepare script left off (the image's WORKDIR",
        "#    unless it changed directory): cd explicitly. The image's ENTRYPOINT is not used.",
        'exec bash "${RLARK_SCRIPT_DIR}/run.sh"',
    ]


def build_start_script(
    *,
    plan: TaskPlan,
    ssh_keys: Sequence[str],
    prepare_script: str,
    run_script: str,
    ray_temp_dir: bool,
) -> str:
    """The bash program for every pod of one Task (`run_script` is used on the Head Task only)."""
    lines = [
        "# RLark start script (generated; see docs/manifest.md). Needs bash, coreutils,",
        "# the Ray CLI (Ray >= 2.47) and python in the image.",
        "set -euo pipefail",
        "rlark_log() { printf 'rlark: %s\\n' \"$*\" >&2; }",
        *_identity(plan),
        *_authorized_keys(ssh_keys),
        *_script_files(prepare_script=prepare_script, run_script=run_script if plan.head else None),
        *_prepare(prepare_script),
        *_ray(plan, ray_temp_dir),
    ]
    if plan.head:
        lines += _cluster_check_and_run()
    return "\n".join(lines) + "\n"
