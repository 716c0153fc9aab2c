"""The `rlark` commands (SPEC 17, docs/cli.md), on click.

Every command is a thin call of one API endpoint (two for the followers) and a rendering of its
answer; nothing here decides what a job may be. Each command returns its exit code; `main`
turns every failure into one `error:` line on stderr and one of the exit codes 0-6.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from rlark_cli import errors
from rlark_cli.errors import CliError
from rlark_cli.output import FORMATS

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
MAX_FILE_BYTES = 4 * 1024 * 1024  # what is sent at most; the server's own limit is smaller


def output_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-o", "--output", "fmt", type=click.Choice(FORMATS), default="table",
                        show_default=True, help="How to print the data.")(function)


def example(text: str) -> str:
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in text.strip().splitlines())


class State:
    def __init__(self, profile: str | None, timeout: float) -> None:
        self.profile_name = profile
        self.timeout = timeout
        self._client: Any = None

    def client(self, *, token: bool = True) -> Any:
        from rlark_cli import config
        from rlark_cli.client import Client

        if self._client is None:
            profile = config.resolve(self.profile_name)
            config.require(profile)
            if token and not profile.token:
                raise CliError(f"not logged in (profile {profile.name!r} has no token): run "
                               "`rlark login` or set RLARK_TOKEN")
            self._client = Client(profile.url, profile.token, timeout=self.timeout,
                                  profile=profile.name)
        return self._client


pass_state = click.make_pass_decorator(State)


@click.group(context_settings=CONTEXT, epilog=example("""
rlark login --url https://rlark.example.com --username alice --password-stdin < pw
rlark apply -f ppo.yaml && rlark submit ppo-math-7b --until running
rlark logs ppo-math-7b -f
"""))
@click.option("--profile", "-p", metavar="NAME", help="Config profile (default: RLARK_PROFILE, "
              "then the one `login` stored last).")
@click.option("--timeout-http", "http_timeout", type=click.FloatRange(1, 600), default=30,
              show_default=True, metavar="S", help="Seconds to wait for each answer.")
@click.version_option(package_name="rlark", prog_name="rlark")
@click.pass_context
def cli(ctx: click.Context, profile: str | None, http_timeout: float) -> None:
    """rlark: RLark jobs from the command line (a client of the REST API).

    Exit codes: 0 ok; 1 findings with errors, or the job failed; 2 a bad file or usage, or a
    network, token or server error; 3 cancelled; 4 timed out or interrupted while waiting;
    5 blocked by findings; 6 not found.
    """
    ctx.obj = State(profile, http_timeout)


# -- login, whoami ------------------------------------------------------------------------------


@cli.command(epilog=example("""
rlark login --url https://rlark.example.com --username alice --password-stdin < ~/.rlark-pw
rlark --profile ci login --url https://rlark.example.com --token "$RLARK_CI_TOKEN"
"""))
@click.option("--url", help="The RLark site (default: the profile's, or RLARK_URL).")
@click.option("--username", "-u", help="Log in with a username and password.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--token", "token_arg", metavar="T",
              help="Store an existing API token (`-` reads it from standard input).")
@click.option("--token-days", type=click.IntRange(1, 3650), metavar="N",
              help="Days the new token lasts (default: the server's).")
@pass_state
def login(state: State, url: str | None, username: str | None, password_stdin: bool,
          token_arg: str | None, token_days: int | None) -> int:
    """Store a token for the profile: a new one from a username and password (the token API),
    or one you have. The token is written to the config file (0600) and never printed."""
    import socket

    from rlark_cli import config
    from rlark_cli.client import Client, site_url

    profile = config.resolve(state.profile_name)
    url = site_url(url or profile.url)
    if not url:
        raise click.UsageError("give the site with --url (or RLARK_URL)")
    if token_arg is not None and (username or password_stdin):
        raise click.UsageError("use either --token or --username/--password-stdin")
    client = Client(url, "", timeout=state.timeout, profile=profile.name)
    if token_arg is not None:
        token = sys.stdin.readline().strip() if token_arg == "-" else token_arg.strip()
        if not token:
            raise click.UsageError("the token is empty")
    else:
        if not username:
            if not sys.stdin.isatty():
                raise click.UsageError("give --username with --password-stdin, or --token")
            username = click.prompt("Username", err=True)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        elif sys.stdin.isatty():
            password = click.prompt("Password", hide_input=True, err=True)
        else:
            raise click.UsageError("standard input is not a terminal: use --password-stdin")
        if not password:
            raise click.UsageError("the password is empty")
        body: dict[str, Any] = {"username": username, "password": password,
                                "name": f"rlark-cli@{socket.gethostname()}"[:100]}
        if token_days:
            body["expires_in_days"] = token_days
        answer = client.request("POST", "auth/token/", json_body=body, auth=False)
        token = str(answer.data["token"])
    client.token = token
    me = client.request("GET", "auth/me/").data  # the token works before it is stored
    path = config.store(profile.name, url=url, token=token)
    click.echo(f"logged in to {url} as {me['username']} (profile {profile.name}, "
               f"stored in {path})", err=True)
    return errors.OK


@cli.command(epilog=example("rlark logout"))
@pass_state
def logout(state: State) -> int:
    """Forget the profile's token (it stays valid on the server until it expires or is
    revoked on the API tokens page)."""
    from rlark_cli import config

    profile = config.resolve(state.profile_name)
    removed = config.forget_token(profile.name)
    click.echo(f"profile {profile.name}: token " + ("removed" if removed else "was not set"),
               err=True)
    return errors.OK


@cli.command(epilog=example("rlark whoami -o json"))
@output_option
@pass_state
def whoami(state: State, fmt: str) -> int:
    """Show who the profile's token is: user, teams, the token's name and expiry."""
    from rlark_cli import config, output

    client = state.client()
    me = client.request("GET", "auth/me/").data
    profile = config.resolve(state.profile_name)
    data = {"url": client.url, "profile": profile.name, **me}

    def table(d: dict[str, Any]) -> str:
        token = d.get("token") or {}
        return output.pairs([
            ("url", d["url"]), ("profile", d["profile"]), ("user", d["username"]),
            ("platform admin", d["is_platform_admin"]),
            ("teams", [f"{t['slug']} ({t['role']})" for t in d["teams"]]),
            ("token", f"{token.get('name')} (expires {token.get('expiry') or 'never'})"
             if token else "-"),
        ])

    output.emit(data, fmt, table)
    return errors.OK


# -- files ----------------------------------------------------------------------------------


def read_file(path: str) -> bytes:
    """The file's bytes as on disk (`-` is standard input), bounded; judged by the server."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    else:
        import os

        if os.path.isdir(path):
            raise CliError(f"{path} is a directory, not a job file")
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as error:
            raise CliError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CliError(f"{path}: over {MAX_FILE_BYTES >> 20} MiB, not sent (job files are a "
                       "few KiB)")
    return data


def in_file(path: str, error: CliError) -> CliError:
    """A file problem named by its file: `FILE: line L, column C: ...`."""
    error.message = f"{path}: {error.message}"
    return error


def post_file(client: Any, endpoint: str, path: str, data: bytes, query: Any = None,
              expect: tuple[int, ...] = ()) -> Any:
    try:
        return client.request("POST", endpoint, body=data, content_type="application/yaml",
                              query=query, expect=expect)
    except CliError as error:
        if error.body is not None and "problems" in error.body:
            raise in_file(path, error) from None
        raise


def count_findings(findings: list[dict[str, Any]]) -> str:
    errors_n = sum(1 for f in findings if f.get("severity") == "error")
    warnings_n = len(findings) - errors_n
    return (f"{errors_n} error{'s' if errors_n != 1 else ''}, "
            f"{warnings_n} warning{'s' if warnings_n != 1 else ''}")


@cli.command(epilog=example("""
rlark validate -f ppo.yaml
rlark validate -f jobs/*.yaml -o json     # in CI: exit 1 on findings with errors
"""))
@click.option("-f", "--file", "files", multiple=True, metavar="FILE",
              help="A job file (repeatable; `-` is standard input).")
@click.argument("more", nargs=-1, metavar="[FILE]...")
@output_option
@pass_state
def validate(state: State, files: tuple[str, ...], more: tuple[str, ...], fmt: str) -> int:
    """Check job files: the server's findings of each, as the draft would be after `apply`.
    Nothing is stored. Exit 0 no errors, 1 findings with errors, 2 a bad file."""
    from rlark_cli import output
    from rlark_cli.client import finding_lines

    paths = [*files, *more]
    if not paths:
        raise click.UsageError("name a job file with -f FILE")
    client = state.client()
    results, code = [], errors.OK
    for path in paths:
        try:
            answer = post_file(client, "job-files/validate/", path, read_file(path)).data
        except CliError as error:
            if error.body is None or error.code not in (errors.USAGE, errors.NOT_FOUND):
                raise  # not about this file: the network, the token, the server
            code = errors.USAGE
            print_error(error if error.message.startswith(f"{path}:") else in_file(path, error))
            results.append({"file": path, "valid": False, "error": error.message,
                            "problems": (error.body or {}).get("problems", [])})
            continue
        if answer.get("has_errors") and code == errors.OK:
            code = errors.ERRORS
        results.append({"file": path, "valid": True, **answer})

    def table(rows: list[dict[str, Any]]) -> str:
        lines = []
        for row in rows:
            if not row["valid"]:
                lines.append(f"{row['file']}: bad file")
                continue
            findings = row.get("findings") or []
            lines.append(f"{row['file']}: {row['name']} ({row['team']}): "
                         + (count_findings(findings) if findings else "no findings"))
            lines += [f"  {line}" for line in finding_lines(findings)]
        return "\n".join(lines)

    output.emit(results, fmt, table)
    return code


def change_lines(changes: list[dict[str, Any]]) -> list[str]:
    from rlark_cli.output import cell

    lines = []
    for change in changes:
        kind = change.get("change")
        if kind == "changed":
            lines.append(f"  ~ {change['path']}: {cell(change.get('from'))} -> "
                         f"{cell(change.get('to'))}")
        elif kind == "added":
            lines.append(f"  + {change['path']}: {cell(change.get('to'))}")
        else:
            lines.append(f"  - {change['path']}: {cell(change.get('from'))}")
    return lines


@cli.command(epilog=example("""
rlark apply -f ppo.yaml --dry-run     # what would change
rlark apply -f ppo.yaml               # created / updated / unchanged
"""))
@click.option("-f", "--file", "path", required=True, metavar="FILE",
              help="The job file (`-` is standard input).")
@click.option("--dry-run", is_flag=True, help="Show what would change; store nothing.")
@output_option
@pass_state
def apply(state: State, path: str, dry_run: bool, fmt: str) -> int:
    """Create or update the draft named in the file so that it is exactly the file; prints
    what changed, or `unchanged`."""
    from rlark_cli import output

    data = read_file(path)
    answer = post_file(state.client(), "job-files/apply/", path, data,
                       query={"dry_run": "true" if dry_run else "false"}).data

    def table(a: dict[str, Any]) -> str:
        verb = a["action"]
        if a.get("dry_run") and verb != "unchanged":
            verb = {"created": "would be created", "updated": "would be updated"}.get(verb, verb)
        lines = [f"job {a['name']} ({a['team']}) {verb}"]
        lines += change_lines(a.get("changes") or [])
        findings = a.get("findings") or []
        if findings:
            lines.append(f"findings: {count_findings(findings)} (rlark validate -f {path})")
        return "\n".join(lines)

    output.emit(answer, fmt, table)
    return errors.OK


# -- jobs ---------------------------------------------------------------------------------


JOB_COLUMNS = [("NAME", "name"), ("TEAM", "team"), ("STATE", "state"), ("STALLED", "stalled"),
               ("PENDING", "_pending"), ("PROGRESS", "_progress"),
               ("CREATED BY", "created_by"), ("UPDATED", "updated_at")]
PENDING_WIDTH = 40
"""The most characters of a Pending summary a `rlark list` row shows."""


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def job_row(row: dict[str, Any]) -> dict[str, Any]:
    """A job list row with its table cells: PENDING is "overdue" when flagged Pending too long,
    then the summary shortened; PROGRESS is step/total (step alone when the total is unknown)."""
    pending = row.get("pending") or {}
    summary = shorten(str(pending.get("summary") or ""), PENDING_WIDTH)
    if row.get("pending_flagged"):
        summary = f"overdue: {summary}" if summary else "overdue"
    progress = row.get("progress") or {}
    step, total = progress.get("step"), progress.get("total")
    shown = None if step is None else f"{step}/{total}" if total is not None else str(step)
    return {**row, "_pending": summary or None, "_progress": shown}


def fetch_all(client: Any, path: str, query: dict[str, Any], limit: int | None) -> list[Any]:
    rows: list[Any] = []
    offset, page = 0, 500
    while True:
        want = page if limit is None else min(page, limit - len(rows))
        answer = client.request("GET", path, query={**query, "limit": want,
                                                    "offset": offset}).data
        rows += answer.get("results") or []
        offset += want
        if not answer.get("next") or (limit is not None and len(rows) >= limit):
            return rows


@cli.command("list", epilog=example("""
rlark list --state running --mine
rlark list --cluster gpu-a -o json
"""))
@click.option("--state", "state_filter", help="Only jobs in this state.", type=click.Choice([
    "draft", "queued", "submitting", "submit_failed", "pending", "running", "succeeded",
    "failed", "cancelled"]))
@click.option("--cluster", metavar="C", help="Only jobs on this cluster.")
@click.option("--mine", is_flag=True, help="Only jobs you created.")
@click.option("--team", metavar="SLUG", help="Only this team's jobs.")
@click.option("--limit", type=click.IntRange(1), metavar="N", help="At most N jobs.")
@output_option
@pass_state
def list_jobs(state: State, state_filter: str | None, cluster: str | None, mine: bool,
              team: str | None, limit: int | None, fmt: str) -> int:
    """Your teams' jobs, newest change first."""
    from rlark_cli import output

    client = state.client()
    query: dict[str, Any] = {}
    if state_filter:
        query["state"] = state_filter
    if cluster:
        query["cluster"] = cluster
    if team:
        query["team"] = team
    if mine:
        query["creator"] = client.request("GET", "auth/me/").data["username"]
    rows = fetch_all(client, "jobs/", query, limit)
    output.emit(rows, fmt, lambda r: output.columns([job_row(row) for row in r], JOB_COLUMNS,
                                                    empty="no jobs"))
    return errors.OK


def get_job(client: Any, name: str) -> dict[str, Any]:
    from rlark_cli.client import q

    try:
        data: dict[str, Any] = client.request("GET", f"jobs/{q(name)}/").data
    except CliError as error:
        if error.code == errors.NOT_FOUND:
            raise CliError(f"job {name!r} not found (no such job in your teams)",
                           errors.NOT_FOUND) from None
        raise
    return data


def not_found_as_job(name: str, kind: str = "job") -> Callable[[CliError], CliError]:
    def convert(error: CliError) -> CliError:
        if error.code == errors.NOT_FOUND:
            return CliError(f"{kind} {name!r} not found (no such {kind} in your teams)",
                            errors.NOT_FOUND)
        return error
    return convert


def not_found_as(message: str) -> Callable[[CliError], CliError]:
    def convert(error: CliError) -> CliError:
        return CliError(message, errors.NOT_FOUND) if error.code == errors.NOT_FOUND else error
    return convert


def call(convert: Callable[[CliError], CliError], function: Callable[[], Any]) -> Any:
    try:
        return function()
    except CliError as error:
        raise convert(error) from None


HOURS = [("productive", "productive"), ("stalled", "stalled"), ("failed", "failed"),
         ("pending_partial", "partial")]


def gpu_hours_text(hours: dict[str, Any] | None) -> str:
    """A run's `gpu_hours` (SPEC 16) on one line: reserved, then its split, and idle when
    Prometheus measures it; "" for a run never submitted (the API's null); a sentence for a run
    no pod of which has held a GPU yet, as the job page says it."""
    if not hours:
        return ""
    if not hours.get("reserved") and not hours.get("idle"):
        return "none so far (no pod of this run has held a GPU)"
    from rlark_cli.output import cell

    split = ", ".join(f"{label} {cell(hours.get(key))}" for key, label in HOURS)
    idle = f"idle {cell(hours.get('idle'))}" if hours.get("idle_measured") else \
        "idle not measured"
    return f"{cell(hours.get('reserved'))} reserved: {split}; {idle}"


def gpu_text(gpu: dict[str, Any] | None) -> str:
    """SPEC 16's GPU idleness (`gpu`, from Prometheus) on one line, as the job page says it;
    "" when RLark does not read it (no Prometheus) and has no reading."""
    if not gpu or (gpu.get("reason_code") == "not_configured" and not gpu.get("checked_at")):
        return ""
    if gpu.get("idle") is None:
        return f"unknown: {gpu.get('reason') or gpu.get('reason_code') or '-'}"
    text = "idle" if gpu["idle"] else "active"
    if gpu["idle"] and gpu.get("idle_since"):
        text += f" since {gpu['idle_since']}"
    readings = []
    if gpu.get("tensor_active") is not None:
        readings.append(f"tensor cores active {gpu['tensor_active'] * 100:.1f} %")
    if gpu.get("utilization") is not None:
        readings.append(f"utilization {gpu['utilization']:g} %")
    if readings:
        minutes = f" over {gpu['window_seconds'] / 60:g} min" if gpu.get("window_seconds") else ""
        text += f" ({', '.join(readings)}{minutes}, {gpu.get('gpus') or 0} GPUs)"
    return text


def run_items(run: dict[str, Any]) -> list[tuple[str, Any]]:
    """SPEC 16's blocks of a run as `key: value` lines, the same in `status` (job detail) and
    `record` (run record), which both answer them: progress, a stall, the cause, GPU activity
    and GPU-hours; nothing for a block the server left empty."""
    items: list[tuple[str, Any]] = []
    progress = run.get("progress") or {}
    if progress.get("step") is not None:
        total = f"/{progress['total']}" if progress.get("total") else ""
        rate = progress.get("steps_per_hour")
        text = f"step {progress['step']}{total}"
        if rate:
            text += f", {rate:.0f} steps/h"
        if progress.get("eta"):
            text += f", ETA {progress['eta']}"
        items.append(("progress", text))
    if progress.get("stalled"):
        items.append(("stalled", f"since {progress.get('stalled_since')}"))
    cause = run.get("cause") or {}
    if cause.get("tag"):  # SPEC 16: the earliest evidence across every role
        items.append(("cause", f"{cause['tag']} in {cause.get('pod') or '-'}: "
                               f"{cause.get('evidence') or ''}".rstrip(": ")))
    activity = gpu_text(run.get("gpu"))
    if activity:
        items.append(("gpu", activity))
    hours = gpu_hours_text(run.get("gpu_hours"))
    if hours:
        items.append(("gpu-hours", hours))
    return items


def status_table(job: dict[str, Any]) -> str:
    from rlark_cli import output
    from rlark_cli.client import finding_lines

    items: list[tuple[str, Any]] = [("name", job["name"]), ("team", job["team"]),
                                    ("state", job["state"])]
    if job.get("cluster"):
        items.append(("cluster", f"{job['cluster']} / {job.get('namespace')}"))
    if job.get("status_reason") or job.get("status_message"):
        items.append(("reason", f"{job.get('status_reason') or '-'}: "
                                f"{job.get('status_message') or ''}".rstrip(": ")))
    pending = job.get("pending") or {}
    if pending.get("summary"):  # SPEC 15: why a submitted job waits, in one sentence
        items.append(("pending", pending["summary"]))
    capacity = job.get("capacity") or {}
    if capacity.get("verdict"):  # SPEC 15's pre-flight: will it get its GPUs?
        as_of = f" (occupancy of {capacity['as_of']})" if capacity.get("as_of") else ""
        items.append(("capacity", f"{capacity['verdict']}{as_of}"))
    admission = job.get("admission")
    if admission:
        where = f", position {admission['position']}" if admission.get("position") else ""
        items.append(("admission", f"{admission.get('state')} in {admission.get('queue')}"
                                   f"{where}: {admission.get('message') or ''}"))
    items += run_items(job)
    findings = job.get("findings") or []
    items.append(("findings", count_findings(findings) if findings else "none"))
    text = output.pairs(items)
    lines = finding_lines(findings)
    return text + ("\n" + "\n".join(f"  {line}" for line in lines) if lines else "")


@cli.command(epilog=example("rlark status ppo-math-7b"))
@click.argument("name")
@output_option
@pass_state
def status(state: State, name: str, fmt: str) -> int:
    """A job's state, the reason it waits, its admission, progress and findings."""
    from rlark_cli import output

    output.emit(get_job(state.client(), name), fmt, status_table)
    return errors.OK


TERMINAL = {"succeeded": errors.OK, "failed": errors.ERRORS, "submit_failed": errors.ERRORS,
            "cancelled": errors.CANCELLED}
ORDER = ["draft", "queued", "submitting", "pending", "running", "succeeded"]


def send_uninterrupted(function: Callable[[], Any]) -> tuple[Any, bool]:
    """Run one request with Ctrl-C held back until it answers, so it is sent or not, never
    left half-way: (its result, whether Ctrl-C came meanwhile)."""
    import signal

    interrupted = []

    def hold(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        print("rlark: waiting for the server's answer before stopping...", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        result = function()
    finally:
        signal.signal(signal.SIGINT, previous)
    return result, bool(interrupted)


@cli.command(epilog=example("""
rlark submit ppo-math-7b
rlark submit ppo-math-7b --until running --timeout 600
rlark submit ppo-math-7b --wait          # exit 0 succeeded, 1 failed, 3 cancelled
"""))
@click.argument("name")
@click.option("--wait", is_flag=True, help="Follow the job until it ends.")
@click.option("--until", "until", type=click.Choice(["pending", "running"]),
              help="Follow until the job reaches this state (implies --wait).")
@click.option("--timeout", type=click.FloatRange(0, min_open=True), metavar="S",
              help="Stop waiting after S seconds (exit 4).")
@click.option("--interval", type=click.FloatRange(0.2, 60), default=2, show_default=True,
              metavar="S", help="Seconds between status reads while waiting.")
@output_option
@pass_state
def submit(state: State, name: str, wait: bool, until: str | None, timeout: float | None,
           interval: float, fmt: str) -> int:
    """Submit a draft. Exit 0 submitted (or succeeded / reached --until), 1 failed,
    3 cancelled, 4 timed out or interrupted while waiting, 5 blocked by findings. A job
    already submitted is not submitted again: it is followed."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    answer: Any = None
    try:
        answer, interrupted = send_uninterrupted(lambda: client.request(
            "POST", f"jobs/{q(name)}/submit/", expect=(409,)))
    except CliError as error:
        if error.code == errors.NOT_FOUND:
            raise CliError(f"job {name!r} not found (no such job in your teams)",
                           errors.NOT_FOUND) from None
        if error.code == errors.BLOCKED:
            error.message = f"job {name!r} not submitted: {error.message}"
        raise
    if answer.status == 409:
        job = get_job(client, name)
        click.echo(f"job {name} was already submitted ({job['state']})", err=True)
        data = {"name": name, "state": job["state"], "submitted": False}
    else:
        click.echo(f"job {name} submitted ({answer.data.get('state')})", err=True)
        data = {"name": name, "state": answer.data.get("state"), "submitted": True}
    if interrupted:
        click.echo(f"interrupted: job {name} is submitted; follow it with `rlark status "
                   f"{name}`", err=True)
        return errors.TIMED_OUT
    if not (wait or until):
        output.emit(data, fmt, lambda d: "")
        return errors.OK
    code, job = follow(client, name, until, timeout, interval)
    output.emit(job, fmt, lambda d: f"{d['name']}: {d['state']}")
    return code


def follow(client: Any, name: str, until: str | None, timeout: float | None,
           interval: float) -> tuple[int, dict[str, Any]]:
    import time

    started = time.monotonic()
    last = ""
    tty = False  # a line per change; the elapsed counter is in each line
    job: dict[str, Any] = {"name": name, "state": "?"}
    try:
        while True:
            job = get_job(client, name)
            current = job["state"]
            elapsed = time.monotonic() - started
            reason = job.get("status_reason") or ""
            line = f"{name}: {current}" + (f" ({reason})" if reason else "")
            if line != last:
                click.echo(f"[{elapsed:5.0f}s] {line}", err=True)
                last = line
            elif tty:
                click.echo(f"\r[{elapsed:5.0f}s] {line}", err=True, nl=False)
            if until and current in ORDER and ORDER.index(current) >= ORDER.index(until):
                return errors.OK, job
            if current in TERMINAL:
                return TERMINAL[current], job
            if timeout is not None and elapsed >= timeout:
                click.echo(f"timed out after {timeout:g} s: job {name} is {current} (still "
                           "submitted)", err=True)
                return errors.TIMED_OUT, job
            time.sleep(interval if timeout is None else
                       max(0.0, min(interval, timeout - elapsed)))
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: stopped waiting; job {name} is {job['state']} and stays "
                   f"submitted (`rlark cancel {name}` cancels it)", err=True)
        return errors.TIMED_OUT, job


@cli.command(epilog=example("rlark cancel ppo-math-7b"))
@click.argument("name")
@output_option
@pass_state
def cancel(state: State, name: str, fmt: str) -> int:
    """Cancel a submitted job: its Job is deleted from the cluster, its record kept."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    answer, _interrupted = send_uninterrupted(lambda: call(
        not_found_as_job(name), lambda: client.request("POST", f"jobs/{q(name)}/cancel/")))
    output.emit(answer.data, fmt, lambda d: f"job {name} {d.get('state')}")
    return errors.OK


@cli.command(epilog=example("rlark events ppo-math-7b"))
@click.argument("name")
@output_option
@pass_state
def events(state: State, name: str, fmt: str) -> int:
    """A running job's Kubernetes events: Warnings first, Normal events grouped like
    `kubectl describe` (the server's summary)."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    data = call(not_found_as_job(name),
                lambda: client.request("GET", f"jobs/{q(name)}/events/").data)

    def table(d: dict[str, Any]) -> str:
        events_list = d.get("events") or []
        warnings = [e for e in events_list if e.get("type") == "Warning"]
        lines = []
        if d.get("error"):
            lines.append(f"note: {d['error']}")
        summary = d.get("summary") or {}
        lines.append(f"{summary.get('warning_count', len(warnings))} warnings, "
                     f"{summary.get('normal_count', 0)} normal events")
        if warnings:
            rows = [{**e, "object": f"{e.get('kind')}/{e.get('name')}"} for e in warnings]
            lines.append(output.columns(rows, [
                ("LAST SEEN", "last_at"), ("REASON", "reason"), ("OBJECT", "object"),
                ("COUNT", "count"), ("MESSAGE", "message")]))
        groups = summary.get("normal_groups") or []
        if groups:
            lines.append(output.columns(groups, [
                ("KIND", "kind"), ("REASON", "reason"), ("OBJECTS", "objects"),
                ("COUNT", "count"), ("LAST", "last_at"), ("MESSAGE", "message")]))
        return "\n".join(lines)

    output.emit(data, fmt, table)
    return errors.OK


@cli.command(epilog=example("rlark record ppo-math-7b -o yaml"))
@click.argument("name")
@output_option
@pass_state
def record(state: State, name: str, fmt: str) -> int:
    """A run record: the whole chain frozen at submission (launch list, parameters,
    manifest, state history)."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    data = call(not_found_as_job(name, "run record"),
                lambda: client.request("GET", f"run-records/{q(name)}/").data)

    def table(d: dict[str, Any]) -> str:
        job = d.get("job") or {}
        manifest = d.get("manifest") or {}
        submission = d.get("submission") or {}
        items: list[tuple[str, Any]] = [(k, job.get(k)) for k in (
            "name", "team", "state", "cluster", "namespace", "submitted_at", "status_reason")]
        items += [("submission", submission.get("state")),
                  ("manifest sha256", manifest.get("sha256")),
                  ("frozen", f"{manifest.get('frozen_at')} by {manifest.get('frozen_by')}"),
                  ("launch list", (d.get("launch_list") or {}).get("title")),
                  ("parameters", (d.get("deployment_parameters") or {}).get("title")),
                  ("status changes", len(d.get("status_history") or []))]
        return output.pairs(items + run_items(d))

    output.emit(data, fmt, table)
    return errors.OK


@cli.command(epilog=example("rlark diff ppo-math-7b ppo-math-7b-lr3"))
@click.argument("a")
@click.argument("b")
@output_option
@pass_state
def diff(state: State, a: str, b: str, fmt: str) -> int:
    """What changed from run record A to run record B, by role and field, and the diff of
    their manifests."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    data = call(not_found_as_job(b, "run record"), lambda: client.request(
        "GET", f"run-records/{q(b)}/diff/", query={"against": a}).data)

    def table(d: dict[str, Any]) -> str:
        lines = [f"from {d['from']} to {d['to']}"]
        changes = d.get("changes") or {}
        for change in changes.get("job") or []:
            lines.append(f"  ~ {change.get('field')}: {output.cell(change.get('from'))} -> "
                         f"{output.cell(change.get('to'))}")
        for role in changes.get("roles") or []:
            lines.append(f"  role {role.get('role')}: {role.get('change')}")
            for change in role.get("fields") or []:
                lines.append(f"    ~ {change.get('field')}: {output.cell(change.get('from'))}"
                             f" -> {output.cell(change.get('to'))}")
        if len(lines) == 1:
            lines.append("  no changes")
        return "\n".join(lines)

    output.emit(data, fmt, table)
    return errors.OK


# -- usage ----------------------------------------------------------------------------------


USAGE_MEASURES = [("RESERVED", "reserved"), *((label.upper(), key) for key, label in HOURS)]


def usage_table(body: dict[str, Any]) -> str:
    """The report: a line naming what it counts, one row per group, then the total."""
    from rlark_cli import output

    group_by = body.get("group_by") or "day"
    teams = body.get("team") or ", ".join(body.get("teams") or []) or "no teams"
    head = (f"GPU-hours of {teams}, {body.get('from')} to {body.get('to')} (counted until "
            f"{body.get('counted_until')}), {body.get('runs')} runs, per {group_by}")
    spec = [(group_by.upper(), "key")]
    if group_by == "job":
        spec += [("TEAM", "team"), ("USER", "user"), ("STATE", "state")]
    spec += USAGE_MEASURES
    if body.get("idle_measured"):
        spec.append(("IDLE", "idle"))
    else:
        head += "; idle not measured"
    groups = list(body.get("groups") or [])
    if not groups:
        return f"{head}\nno GPU-hours in this window"
    total = {**(body.get("total") or {}), "key": "total"}
    return f"{head}\n" + output.columns([*groups, total], spec)


@cli.command(epilog=example("""
rlark usage --team vision-rl --from 2026-11-01 --to 2026-11-30 --group-by week
rlark usage --group-by job -o json
rlark usage --team vision-rl --group-by user --csv > gpu-hours.csv
"""))
@click.option("--team", metavar="SLUG", help="One team (default: all your teams).")
@click.option("--from", "start", metavar="DATE", help="YYYY-MM-DD or an ISO 8601 date-time "
              "(default: 30 days before --to).")
@click.option("--to", "end", metavar="DATE", help="YYYY-MM-DD (that day included) or an ISO "
              "8601 date-time (default: now).")
@click.option("--group-by", type=click.Choice(["day", "week", "user", "job"]), default="day",
              show_default=True, help="One row per day, week (Monday), user or job.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the server's CSV (the usage page's "
              "export) instead.")
@output_option
@pass_state
def usage(state: State, team: str | None, start: str | None, end: str | None, group_by: str,
          as_csv: bool, fmt: str) -> int:
    """GPU-hours of your teams (GET usage/): reserved, split into productive, stalled, failed
    and partially started (idle when Prometheus measures it), per day, week, user or job."""
    from rlark_cli import output

    if as_csv and fmt != "table":
        raise click.UsageError("--csv prints the CSV; leave out -o")
    query = {"group_by": group_by}
    query.update({k: v for k, v in (("team", team), ("from", start), ("to", end)) if v})
    if as_csv:
        query["format"] = "csv"
    client = state.client()
    convert = not_found_as(f"team {team!r} not found (no such team of yours)")
    accept = "text/csv, application/json" if as_csv else "application/json"
    data = call(convert, lambda: client.request("GET", "usage/", query=query,
                                                accept=accept).data)
    if as_csv:
        sys.stdout.write(data)
        return errors.OK
    output.emit(data, fmt, usage_table)
    return errors.OK


# -- logs -----------------------------------------------------------------------------------


def pick_pod(pods: list[dict[str, Any]], job: str, role: str | None,
             replica: int) -> dict[str, Any]:
    if not pods:
        raise CliError(f"job {job!r} has no pods yet")
    if role is None:
        return next((p for p in pods if p["name"].endswith(f"-{replica}")), pods[0])
    task = role.lower()
    for pod in pods:
        if (pod.get("task") or "").lower() == task and pod["name"].endswith(f"-{replica}"):
            return pod
    roles = sorted({p.get("task") or "?" for p in pods})
    raise CliError(f"job {job!r} has no pod for role {role!r} replica {replica} "
                   f"(tasks: {', '.join(roles)})")


ENDED = ("Succeeded", "Failed")


@cli.command(epilog=example("""
rlark logs ppo-math-7b                       # the Header role's first pod
rlark logs ppo-math-7b --role Rollout --replica 1 --tail 200
rlark logs ppo-math-7b -f                    # follow until the pod ends
"""))
@click.argument("name")
@click.option("--role", "-r", metavar="R", help="The role (default: the Header role).")
@click.option("--replica", type=click.IntRange(0), default=0, show_default=True, metavar="N",
              help="Which worker of the role.")
@click.option("--tail", type=click.IntRange(1), metavar="N", help="The last N lines.")
@click.option("--previous", is_flag=True, help="The previous container's log (after a "
              "restart).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the pod "
              "ends (Ctrl-C stops).")
@click.option("--interval", type=click.FloatRange(0.2, 60), default=2, show_default=True,
              metavar="S", help="Seconds between reads with -f.")
@output_option
@pass_state
def logs(state: State, name: str, role: str | None, replica: int, tail: int | None,
         previous: bool, follow: bool, interval: float, fmt: str) -> int:
    """A pod's log (its main container)."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    convert = not_found_as_job(name)
    if role is None:
        role = call(convert, lambda: get_job(client, name)).get("header_role") or None
    pods = call(convert, lambda: client.request("GET", f"jobs/{q(name)}/pods/").data)
    pod = pick_pod(pods.get("pods") or [], name, role, replica)
    query: dict[str, Any] = {"previous": "true" if previous else "false"}
    if tail:
        query["tail"] = tail

    def read() -> dict[str, Any]:
        data: dict[str, Any] = call(convert, lambda: client.request(
            "GET", f"jobs/{q(name)}/pods/{q(pod['name'])}/log/", query=query).data)
        return data

    data = read()
    if not follow or fmt != "table":
        if fmt == "table":
            text = data.get("text") or ""
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        else:
            output.emit(data, fmt, lambda d: "")
        return errors.OK
    printed = (data.get("text") or "").splitlines()
    for line in printed:
        click.echo(line)
    query.pop("tail", None)
    import time

    try:
        while True:
            pods = call(convert, lambda: client.request("GET", f"jobs/{q(name)}/pods/").data)
            now = next((p for p in pods.get("pods") or [] if p["name"] == pod["name"]), None)
            ended = now is None or now.get("phase") in ENDED
            fresh = (read().get("text") or "").splitlines()
            for line in new_lines(printed, fresh):
                click.echo(line)
            printed = fresh
            if ended:
                phase = now.get("phase") if now else "gone"
                click.echo(f"pod {pod['name']} ended ({phase})", err=True)
                return errors.OK
            time.sleep(interval)
    except KeyboardInterrupt:
        return errors.OK


def new_lines(old: list[str], new: list[str]) -> list[str]:
    """The lines of `new` after the longest end of `old` that starts `new` (the log tail
    read again: what was printed already is its beginning)."""
    if not old:
        return new
    for start in range(max(0, len(old) - len(new)), len(old)):
        overlap = old[start:]
        if new[:len(overlap)] == overlap:
            return new[len(overlap):]
    return new


# -- clone, sweep, match, verify ------------------------------------------------------------


@cli.command(epilog=example("""
rlark clone ppo-math-7b ppo-math-7b-lr3 --set roles.Actor.env.LR=3e-4 --set roles.Rollout.gpus=4
"""))
@click.argument("name")
@click.argument("new")
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override one value (repeatable), e.g. roles.Rollout.gpus=4.")
@click.option("--dry-run", is_flag=True, help="Show the result; store nothing.")
@output_option
@pass_state
def clone(state: State, name: str, new: str, overrides: tuple[str, ...], dry_run: bool,
          fmt: str) -> int:
    """A new draft NEW from a draft or a run record NAME, with overrides (checked by the
    server against the job-file schema)."""
    from rlark_cli import output
    from rlark_cli.client import q

    client = state.client()
    body = {"name": new, "set": list(overrides), "dry_run": dry_run}
    answer = call(not_found_as_job(name), lambda: client.request(
        "POST", f"jobs/{q(name)}/clone/", json_body=body)).data

    def table(a: dict[str, Any]) -> str:
        verb = "would be created" if a.get("dry_run") else a.get("action", "created")
        lines = [f"job {a['name']} ({a['team']}) {verb} from {a['source']['name']}"]
        lines += [f"  {o['path']} = {output.cell(o['value'])}" for o in a.get("overrides") or []]
        findings = a.get("findings") or []
        if findings:
            lines.append(f"findings: {count_findings(findings)} (rlark status {a['name']})")
        return "\n".join(lines)

    output.emit(answer, fmt, table)
    return errors.OK


@cli.command(epilog=example("""
rlark sweep -f ppo.yaml --grid roles.Actor.env.LR=1e-4,3e-4 --grid roles.Rollout.gpus=4,8
rlark sweep -f ppo.yaml --grid roles.Actor.env.LR=1e-4,3e-4 --submit
"""))
@click.option("-f", "--file", "path", required=True, metavar="FILE", help="The job file.")
@click.option("--grid", "grids", multiple=True, required=True, metavar="PATH=V1,V2",
              help="Values of one path (repeatable: every combination).")
@click.option("--submit", "submit_all", is_flag=True, help="Submit every draft too (none is "
              "submitted if any has an error).")
@click.option("--dry-run", is_flag=True, help="Show the drafts; store nothing.")
@output_option
@pass_state
def sweep(state: State, path: str, grids: tuple[str, ...], submit_all: bool, dry_run: bool,
          fmt: str) -> int:
    """One draft per combination of the grids, named <name>-<n>, listed with their values.
    Exit 0, 1 when a draft has errors (with --submit: nothing stored), 2 a bad file."""
    from rlark_cli import output

    data = read_file(path)
    query = {"grid": list(grids), "submit": "true" if submit_all else "false",
             "dry_run": "true" if dry_run else "false"}
    try:
        answer = post_file(state.client(), "job-files/sweep/", path, data, query=query,
                           expect=(422,))
    except CliError as error:
        if error.code == errors.NOT_FOUND:
            error.code = errors.USAGE
        raise
    body = answer.data
    drafts = body.get("drafts") or []

    def table(b: dict[str, Any]) -> str:
        rows = [{**d, "values": d.get("values"), "errors": d.get("has_errors")} for d in drafts]
        text = output.columns(rows, [("NAME", "name"), ("ACTION", "action"),
                                     ("STATE", "state"), ("ERRORS", "errors"),
                                     ("VALUES", "values")], empty="no drafts")
        return text

    output.emit(body, fmt, table)
    if answer.status == 422:
        print_error(CliError(str(body.get("detail") or "a draft has errors"), errors.ERRORS))
        return errors.ERRORS
    return errors.ERRORS if any(d.get("has_errors") for d in drafts) else errors.OK


@cli.command(epilog=example("""
rlark match --cluster gpu-a rlinf.io/pool=a100-a
rlark match --cluster gpu-a rlinf.io/pool=a100-a --gpus 8 -o json
rlark match --cluster gpu-a rlinf.io/pool=a100-a --gpus 8 --need cpu=16 --need memory=64Gi
"""))
@click.option("--cluster", required=True, metavar="C", help="The cluster the role runs on.")
@click.argument("conditions", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--gpus", type=click.IntRange(0), metavar="N", help="GPUs per worker the role "
              "needs (sent to the server as the role's needs).")
@click.option("--need", "need_args", multiple=True, metavar="RESOURCE=QUANTITY",
              help="Another need of one worker (repeatable): cpu=16, memory=64Gi, "
              "rlinf.io/rdma=1, pods=1; checked by the server.")
@output_option
@pass_state
def match(state: State, cluster: str, conditions: tuple[str, ...], gpus: int | None,
          need_args: tuple[str, ...], fmt: str) -> int:
    """The global matches of a label selector, judged against the chosen cluster; with
    --gpus or --need, how many matched nodes hold one worker now and ever (SPEC 15)."""
    from rlark_cli import output

    selector = []
    for condition in conditions:
        key, sep, value = condition.partition("=")
        if not sep or not key:
            raise click.UsageError(f"{condition!r} is not KEY=VALUE")
        selector.append([key, value])
    body: dict[str, Any] = {"cluster": cluster, "selector": selector}
    needs: dict[str, Any] = {}
    for need in need_args:
        resource, sep, quantity = need.partition("=")
        if not sep or not resource.strip() or not quantity.strip():
            raise click.UsageError(f"--need {need!r} is not RESOURCE=QUANTITY")
        needs[resource.strip()] = quantity.strip()
    if gpus is not None:
        needs["nvidia.com/gpu"] = gpus
    if needs:
        body["needs"] = needs
    data = state.client().request("POST", "selector-matches/", json_body=body).data

    def table(d: dict[str, Any]) -> str:
        lines = [f"{d.get('count')} nodes match on {', '.join(d.get('clusters') or []) or '-'}"
                 f" (confined to {d.get('cluster')}: {output.cell(d.get('confined'))}, "
                 f"GPUs per node at most {output.cell(d.get('gpu_max'))})"]
        for key in ("fits_now", "fits_ever"):
            if key in d:
                lines.append(f"{key}: {output.cell(d[key])}")
        nodes = d.get("nodes") or []
        if nodes:
            lines.append(output.columns(nodes, [("CLUSTER", "cluster"), ("NODE", "name"),
                                                ("READY", "ready"), ("GPU", "gpu"),
                                                ("FREE GPU", "free_gpu")]))
        return "\n".join(lines)

    output.emit(data, fmt, table)
    return errors.OK


@cli.command(epilog=example("rlark verify ppo-math-7b"))
@click.argument("name")
@output_option
@pass_state
def verify(state: State, name: str, fmt: str) -> int:
    """Request verification of every role that lacks one (the wizard's rules, on the
    server)."""
    from rlark_cli import output
    from rlark_cli.client import finding_lines, q

    client = state.client()
    data = call(not_found_as_job(name), lambda: client.request(
        "POST", f"jobs/{q(name)}/verify/").data)

    def table(d: dict[str, Any]) -> str:
        lines = [output.columns(d.get("roles") or [], [
            ("ROLE", "role"), ("CLUSTER", "cluster"), ("OUTCOME", "outcome"),
            ("VERIFICATION", "verification"), ("STATE", "state")], empty="no roles")]
        for role in d.get("roles") or []:
            lines += [f"  {role['role']}: {line}" for line in finding_lines(role.get("findings"))]
        return "\n".join(lines)

    output.emit(data, fmt, table)
    return errors.OK


@cli.command(epilog=example("""
rlark export ppo-math-7b > ppo.yaml
"""))
@click.argument("name")
@pass_state
def export(state: State, name: str) -> int:
    """A draft or a run record's job as a job file (YAML), to keep, edit and apply."""
    from rlark_cli.client import q

    client = state.client()
    text = call(not_found_as_job(name), lambda: client.request(
        "GET", f"jobs/{q(name)}/job-file/").data)
    sys.stdout.write(text)
    return errors.OK


@cli.command(epilog=example("""
eval "$(rlark completion bash)"      # or add it to ~/.bashrc
rlark completion zsh > ~/.zfunc/_rlark
"""))
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> int:
    """Print the shell completion script (click's own; `_RLARK_COMPLETE` does the work)."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None
    sys.stdout.write(completer(cli, {}, "rlark", "_RLARK_COMPLETE").source())
    return errors.OK


# -- entry point ----------------------------------------------------------------------------


def print_error(error: CliError) -> None:
    print(f"error: {error.message}", file=sys.stderr)
    for line in error.details:
        print(f"  {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.stdout.flush()
    raise SystemExit(code)


def run(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="rlark", standalone_mode=False)
    except CliError as error:
        print_error(error)
        return error.code
    except click.exceptions.Exit as done:
        return min(int(done.exit_code or 0), errors.USAGE)
    except click.ClickException as error:
        error.show()
        return errors.USAGE
    except click.exceptions.Abort:
        print("error: interrupted", file=sys.stderr)
        return errors.USAGE
    except KeyboardInterrupt:
        print("\nerror: interrupted", file=sys.stderr)
        return errors.USAGE
    except BrokenPipeError:
        return errors.OK
    return int(result) if isinstance(result, int) else errors.OK
