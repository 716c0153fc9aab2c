"""The progress pass: one per cluster, reading each Running run's Head Task log incrementally.

`read_cluster_progress` (a Celery task per cluster, fanned out by beat every
`RLARK_PROGRESS_POLL_INTERVAL`) reads the cluster's Running runs and what is kept of them in a
handful of queries, then asks the cluster for each Head Task pod's log **since the last line
consumed** (`sinceTime`, `timestamps=true`, at most `RLARK_PROGRESS_READ_BYTES`; at most
`RLARK_PROGRESS_READERS` reads at once, each read's lines matched in its reader thread so the
matching overlaps the other reads' waits), never for what it already read, and never on behalf
of a viewer (pages and the API read the database). The lines read also feed the run's cause
(`jobs.observe.causes`: a hang's NCCL watchdog line while the run still counts as Running). A
run seen for the first time is read from its newest `FIRST_TAIL` lines. A read that hits the
byte bound leaves the reader behind; the next one asks for the newest lines since the cursor
(`tailLines`, as many as fitted) and skips the middle, so a chatty log never leaves its step
stale.

The steps found move `RunProgress` (written in two statements for the whole cluster, only the
runs that changed), and the stall machine (`jobs.core.stalls`) decides, per run, whether a
stall episode opens, ends or asks for the cancel: `job_stalled` and `job_recovered` go through
`jobs.notify.services.emit` (exactly once by key), a cancel through `jobs.tasks.
cancel_stalled_run` after the commit (claimed once). A cluster that does not answer leaves its
runs as they are until the next pass: no stall is opened from a read that failed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import yaml
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import BadRequest, Credentials, KubeError, NotFound, PodLog, PodLogReader
from clusters.models import Cluster
from jobs.core.progress import (
    Cursor,
    Reading,
    StepPattern,
    add_points,
    compile_step_pattern,
    progress_settings,
    read_steps,
)
from jobs.core.stalls import Episode, Observed, Verdict, decide
from jobs.models import (
    EpisodeEnd,
    EventKind,
    JobState,
    RunProgress,
    RunRecord,
    StallEpisode,
    StatusChange,
)
from jobs.notify.services import emit
from jobs.observe.causes import found_in_stamped_log, offer_causes
from jobs.progress import conf
from rlark_site.foundation.bulk import upsert

__all__ = ["FIRST_TAIL", "ProgressReport", "clusters_with_running_runs", "log_reader",
           "read_cluster_progress",
           "running_since", "stall_cause"]

logger = logging.getLogger(__name__)

FIRST_TAIL = 200
"""Lines of a run's log read the first time (its newest), so an old run costs one bounded read."""
_MIN_TAIL = 50
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_HOT = ("pod", "cursor_at", "cursor_lines", "tail_lines", "step", "total", "first_step_at",
        "last_step_at", "restarts", "bytes_read", "rejected_lines", "skipped_lines",
        "read_error")


class ProgressReport(NamedTuple):
    runs: int
    read: int
    bytes: int
    steps: int
    stalled: int
    recovered: int
    unreachable: int


@dataclass
class _Run:
    """One Running run of the pass and what is kept of it."""

    pk: int
    job_name: str
    namespace: str
    running_since: datetime
    settings: Any
    first_signal_seconds: int | None
    progress: RunProgress
    episode: StallEpisode | None
    fresh: bool = False  # no RunProgress row yet
    log: PodLog | None = None
    size: int = 0  # the log's bytes
    cause: dict[str, Any] | None = None  # the first line of this read naming a cause
    failed: bool = False
    changed: set[str] = field(default_factory=set)


def stall_cause(record_id: int) -> dict[str, Any]:
    """What caused a stall, when known: the run's `cause` ({tag, evidence, pod, at}, SPEC 16)
    as stored now: the earliest evidence of the pods captured so far (a role that restarted
    or ended) and of the Head Task's log read by this pass (`jobs.observe.causes`)."""
    cause = RunRecord.objects.filter(pk=record_id).values_list("cause", flat=True).first()
    return dict(cause) if cause else {}


def running_since() -> Subquery:
    """A run's last entry into Running (its newest `Running` status change), as a subquery
    of a `RunRecord` query."""
    running = StatusChange.objects.filter(run_record=OuterRef("pk"), phase="Running").order_by(
        "-observed_at", "-id")
    return Subquery(running.values("observed_at")[:1])


def clusters_with_running_runs() -> list[str]:
    return list(RunRecord.objects.filter(state=JobState.RUNNING).order_by("cluster")
                .values_list("cluster", flat=True).distinct())


def _first_signal_seconds(signals: Any) -> int | None:
    minutes = [s.get("within_minutes") for s in signals or [] if isinstance(s, dict)]
    valid = [m for m in minutes if isinstance(m, int) and not isinstance(m, bool) and m > 0]
    return min(valid) * 60 if valid else None


def _head_pod(manifest_yaml: str, job_name: str) -> str:
    """The manifest's Head Task's first pod, `<job>-<task>-0` ("" without a Head Task)."""
    try:
        manifest = yaml.load(manifest_yaml, Loader=_SAFE_LOADER) or {}  # noqa: S506 (safe)
    except yaml.YAMLError:
        return ""
    tasks = ((manifest.get("spec") or {}) if isinstance(manifest, dict) else {}).get("tasks")
    head = next((t for t in tasks or [] if isinstance(t, dict) and t.get("head")), None)
    return f"{job_name}-{head.get('name')}-0" if head else ""


def _runs(cluster: str, now: datetime) -> list[_Run]:
    """The cluster's Running runs with their settings, kept progress and open episode: three
    queries (four when runs are new: their manifests, once)."""
    rows = list(RunRecord.objects.filter(cluster=cluster, state=JobState.RUNNING)
                .order_by("pk").values(
                    "pk", "job_name", "namespace", "submitted_at",
                    progress_raw=KeyTransform("progress", "launch_list_snapshot"),
                    signals=KeyTransform("expected_signals", "launch_list_snapshot"),
                    running_since=running_since()))
    ids = [row["pk"] for row in rows]
    kept = RunProgress.objects.in_bulk(ids)
    episodes = {e.run_record_id: e for e in StallEpisode.objects.filter(
        run_record_id__in=ids, ended_at=None)}
    new = [pk for pk in ids if pk not in kept]
    manifests = dict(RunRecord.objects.filter(pk__in=new).values_list("pk", "manifest_yaml")) \
        if new else {}
    runs = []
    for row in rows:
        progress = kept.get(row["pk"])
        fresh = progress is None
        if progress is None:
            progress = RunProgress(run_record_id=row["pk"], tail_lines=FIRST_TAIL,
                                   pod=_head_pod(manifests.get(row["pk"], ""), row["job_name"]))
        runs.append(_Run(
            pk=row["pk"], job_name=row["job_name"], namespace=row["namespace"],
            running_since=row["running_since"] or row["submitted_at"] or now,
            settings=progress_settings(row["progress_raw"]),
            first_signal_seconds=_first_signal_seconds(row["signals"]),
            progress=progress, episode=episodes.get(row["pk"]), fresh=fresh))
    return runs


def _credentials(cluster: str) -> Credentials | None:
    found = Cluster.objects.filter(name=cluster).first()
    if found is None:
        return None
    try:
        return credentials_for(found)
    except CredentialError:
        logger.warning("progress: cluster %s: stored credentials cannot be decrypted", cluster)
        return None


def log_reader(credentials: Credentials) -> PodLogReader:
    """The pass's reader of its cluster's logs (one per pass: its request made once)."""
    return PodLogReader(credentials, timeout=conf.kube_timeout())


def _read_and_process(logs: PodLogReader, run: _Run, max_bytes: int) -> int:
    """In a reader thread: the run's read, then its steps taken (in memory: the run's own
    objects only), so one run's matching overlaps the other reads' waits; the steps moved."""
    _read(logs, run, max_bytes)
    return _process(run)


def _read(logs: PodLogReader, run: _Run, max_bytes: int) -> None:
    """One bounded read of the run's Head Task log since its cursor."""
    progress = run.progress
    try:
        run.log = logs.read(
            namespace=run.namespace, name=progress.pod, since_time=progress.cursor_at,
            tail_lines=progress.tail_lines, timestamps=True, max_bytes=max_bytes)
    except (BadRequest, NotFound) as exc:  # not started, or gone: nothing to read yet
        run.failed = True
        _set(run, "read_error", str(exc)[:500])
    except KubeError as exc:
        run.failed = True
        _set(run, "read_error", str(exc)[:500])
        if exc.transient:
            raise


def _set(run: _Run, name: str, value: Any) -> None:
    if getattr(run.progress, name) != value:
        setattr(run.progress, name, value)
        run.changed.add(name)


def _apply(run: _Run, reading: Reading, *, truncated: bool, size: int) -> int:
    """The new steps and cursor into the run's progress (in memory); how many steps moved."""
    progress = run.progress
    _set(run, "cursor_at", reading.cursor.at)
    _set(run, "cursor_lines", reading.cursor.lines)
    _set(run, "read_error", "")
    progress.rejected_lines += reading.rejected
    progress.skipped_lines += reading.skipped_long
    if reading.lines:  # not a read of nothing new (the cursor's second again): a quiet pass
        progress.bytes_read += size  # writes nothing
        run.changed.add("bytes_read")
    if reading.rejected or reading.skipped_long:
        run.changed.update({"rejected_lines", "skipped_lines"})
    if truncated and reading.lines:  # what fitted in the bound, with room to spare
        _set(run, "tail_lines", max(_MIN_TAIL, reading.lines * 4 // 5))
    elif not truncated and (progress.tail_lines is None
                            or reading.lines < progress.tail_lines // 2):
        _set(run, "tail_lines", None)
    moved = reading.steps
    changes = 0
    for line in moved:
        if line.total is not None:
            _set(run, "total", line.total)
        if line.step == progress.step:
            continue
        if progress.step is not None and line.step < progress.step:
            _set(run, "restarts", progress.restarts + 1)
        _set(run, "step", line.step)
        _set(run, "last_step_at", line.at)
        if progress.first_step_at is None:
            _set(run, "first_step_at", line.at)
        changes += 1
    if changes:
        points = add_points(progress.points, moved)
        if points != progress.points:
            progress.points = points
            run.changed.add("points")
    return changes


def _process(run: _Run) -> int:
    if run.log is None:
        return 0
    run.size = len(run.log.text.encode(errors="replace"))
    try:
        pattern: StepPattern = compile_step_pattern(run.settings.pattern)
    except ValueError as exc:
        _set(run, "read_error", str(exc)[:500])
        return 0
    run.cause = found_in_stamped_log(run.log.text, pod=run.progress.pod, found_at=timezone.now())
    reading = read_steps(run.log.text, pattern=pattern,
                         cursor=Cursor(run.progress.cursor_at, run.progress.cursor_lines),
                         truncated=run.log.truncated)
    return _apply(run, reading, truncated=run.log.truncated, size=run.size)


def _row(run: _Run) -> dict[str, Any]:
    progress = run.progress
    return {"run_record_id": run.pk, "points": progress.points,
            **{name: getattr(progress, name) for name in _HOT}}


def _write(runs: Sequence[_Run]) -> None:
    """The runs whose progress changed, in at most two statements (the series only when it
    changed: kilobytes a run)."""
    with_points = [_row(r) for r in runs if r.fresh or "points" in r.changed]
    hot = [_row(r) for r in runs if not r.fresh and r.changed and "points" not in r.changed]
    if with_points:
        upsert(RunProgress, with_points, unique=("run_record_id",), update=(*_HOT, "points"))
    if hot:
        upsert(RunProgress, hot, unique=("run_record_id",), update=_HOT)


def _observed(run: _Run, now: datetime) -> Observed:
    log = run.log
    return Observed(
        now=now, running_since=run.running_since, last_step_at=run.progress.last_step_at,
        stall_after_seconds=run.settings.stall_after_seconds,
        first_signal_seconds=run.first_signal_seconds,
        cancel_after_stalled_seconds=run.settings.cancel_after_stalled_seconds,
        caught_up=log is not None and not log.truncated and not run.failed)


def _episode(episode: StallEpisode | None) -> Episode | None:
    if episode is None:
        return None
    return Episode(started_at=episode.started_at, last_progress_at=episode.last_progress_at,
                   cancel_requested=episode.cancel_requested_at is not None)


@dataclass
class _Outcome:
    stalled: int = 0
    recovered: int = 0


def _record(pk: int) -> RunRecord:
    return RunRecord.objects.select_related("team").get(pk=pk)


def _open(run: _Run, started_at: datetime, last_progress_at: datetime, now: datetime) -> None:
    number = (StallEpisode.objects.filter(run_record_id=run.pk).count()) + 1
    episode = StallEpisode.objects.create(
        run_record_id=run.pk, number=number, started_at=started_at,
        last_progress_at=last_progress_at, detected_at=now, step=run.progress.step,
        stall_after_seconds=run.settings.stall_after_seconds, cause=stall_cause(run.pk))
    cancel_after = run.settings.cancel_after_stalled_seconds
    emit(kind=EventKind.JOB_STALLED, record=_record(run.pk),
         key=f"{EventKind.JOB_STALLED}:{run.pk}:{number}", details={
             "episode": number, "stalled_since": started_at.isoformat(),
             "last_progress_at": last_progress_at.isoformat(), "step": run.progress.step,
             "total": run.progress.total,
             "stall_after_seconds": run.settings.stall_after_seconds,
             "cancel_at": (started_at + timedelta(seconds=cancel_after)).isoformat()
             if cancel_after else None,
             "cause": episode.cause or None})


def _recover(run: _Run, episode: StallEpisode, ended_at: datetime) -> None:
    closed = StallEpisode.objects.filter(pk=episode.pk, ended_at=None).update(
        ended_at=ended_at, end=EpisodeEnd.RECOVERED, recovered_step=run.progress.step)
    if closed:
        emit(kind=EventKind.JOB_RECOVERED, record=_record(run.pk),
             key=f"{EventKind.JOB_RECOVERED}:{run.pk}:{episode.number}", details={
                 "episode": episode.number, "stalled_since": episode.started_at.isoformat(),
                 "recovered_at": ended_at.isoformat(),
                 "stalled_seconds": int((ended_at - episode.started_at).total_seconds()),
                 "step": run.progress.step, "total": run.progress.total,
                 "cause": episode.cause or None})


def _ask_cancel(episode: StallEpisode, now: datetime) -> None:
    claimed = StallEpisode.objects.filter(pk=episode.pk, ended_at=None,
                                          cancel_requested_at=None).update(
        cancel_requested_at=now)
    if claimed:
        from jobs import tasks  # imports this module's callers; see jobs.notify.services._queue

        transaction.on_commit(lambda: tasks.cancel_stalled_run.delay(episode.pk))


def _decide(runs: Sequence[_Run], now: datetime) -> _Outcome:
    outcome = _Outcome()
    for run in runs:
        if run.log is None and run.episode is None:
            continue
        decision = decide(_episode(run.episode), _observed(run, now))
        if decision.verdict is Verdict.STALLED:
            assert decision.started_at is not None and decision.last_progress_at is not None
            _open(run, decision.started_at, decision.last_progress_at, now)
            outcome.stalled += 1
        elif decision.verdict is Verdict.RECOVERED and run.episode is not None:
            assert decision.ended_at is not None
            _recover(run, run.episode, decision.ended_at)
            outcome.recovered += 1
        elif decision.verdict is Verdict.CANCEL and run.episode is not None:
            _ask_cancel(run.episode, now)
    return outcome


def _end_left_episodes(cluster: str, now: datetime) -> None:
    """Episodes of runs that stopped running (finished, failed, back to Pending) end now."""
    StallEpisode.objects.filter(ended_at=None, run_record__cluster=cluster).exclude(
        run_record__state=JobState.RUNNING).update(ended_at=now, end=EpisodeEnd.RUN_ENDED)


def read_cluster_progress(*, cluster: str, now: datetime | None = None) -> ProgressReport:
    """One progress pass over a cluster's Running runs."""
    now = now or timezone.now()
    _end_left_episodes(cluster, now)
    runs = _runs(cluster, now)
    if not runs:
        return ProgressReport(0, 0, 0, 0, 0, 0, 0)
    credentials = _credentials(cluster)
    if credentials is None:
        return ProgressReport(len(runs), 0, 0, 0, 0, 0, 1)
    readable = [run for run in runs if run.progress.pod]
    unreachable = 0
    steps = 0
    logs, max_bytes = log_reader(credentials), conf.read_bytes()
    with ThreadPoolExecutor(max_workers=conf.readers()) as pool:
        futures = [pool.submit(_read_and_process, logs, run, max_bytes) for run in readable]
        for future in futures:
            try:
                steps += future.result()
            except KubeError as exc:
                unreachable = 1
                logger.info("progress: cluster %s unreachable: %s", cluster, exc)
    with transaction.atomic():
        _write(runs)
        offer_causes({run.pk: run.cause for run in readable if run.cause})
        outcome = _decide(runs, now)
    read = [run for run in readable if run.log is not None]
    return ProgressReport(
        runs=len(runs), read=len(read),
        bytes=sum(run.size for run in read),
        steps=steps, stalled=outcome.stalled, recovered=outcome.recovered,
        unreachable=unreachable)


def cancel_stalled_run(episode_id: int) -> bool:
    """Cancel the run of a stall episode that asked for it (once: the episode's claim), its
    pods captured first (`jobs.records.services.job_cancel`), the reason in its status
    history; whether it was cancelled (not when the run recovered or ended meanwhile)."""
    from jobs.records.services import job_cancel  # records imports observe, not the reverse

    episode = StallEpisode.objects.select_related("run_record__job").get(pk=episode_id)
    record = episode.run_record
    if episode.ended_at is not None or record.state != JobState.RUNNING:
        return False
    seconds = int((timezone.now() - episode.started_at).total_seconds())
    limit = progress_settings(record.launch_list_snapshot.get("progress"))
    since = episode.last_progress_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    message = (f"Cancelled by RLark: no new training step since {since}; stalled for "
               f"{seconds} s, longer than the launch list's "
               f"{limit.cancel_after_stalled_seconds or 0} s.")
    job_cancel(job=record.job, user=None, reason="StalledTooLong", message=message)
    StallEpisode.objects.filter(pk=episode.pk, ended_at=None).update(
        ended_at=timezone.now(), end=EpisodeEnd.CANCELLED)
    return True
