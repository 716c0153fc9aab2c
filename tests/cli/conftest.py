"""The installed `rlark` (.venv/bin/rlark) run as a subprocess against a live RLark.

`site` (one per module): the web process as `make run` starts it (gunicorn, tests/site/
live_web.py) on the test database, the demo fleet served by the simulator over HTTP, a team
with a maintainer and the other team's job, all committed (the web process is another process);
the database is flushed when the module ends. Submissions and status passes run in this process
(`Site.pump`: the submission task and the status pass, the code the Celery worker runs), so a
test decides when the cluster moves.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

RLARK = Path(sys.executable).parent / "rlark"
PASSWORD = "correct-horse-battery"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Site:
    url: str
    sim: Any
    config_home: Path
    token: str
    outsider_token: str
    owner: Any = None
    admin: Any = None
    secrets: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLARK_")}
        env.update({"XDG_CONFIG_HOME": str(self.config_home), "RLARK_URL": self.url,
                    "RLARK_TOKEN": self.token, "PYTHONUNBUFFERED": "1"})
        env.update(extra)
        return {k: v for k, v in env.items() if v != ""}

    def run(self, *args: str, stdin: str | bytes | None = None, timeout: float = 60,
            **env: str) -> Result:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        done = subprocess.run([str(RLARK), *args], input=data, capture_output=True,
                              env=self.env(**env), timeout=timeout)
        result = Result(done.returncode, done.stdout.decode(), done.stderr.decode())
        self.seen += [result.out, result.err]
        return result

    def start(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([str(RLARK), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env(**env))

    def submittable(self, name: str, **options: Any) -> Any:
        """A draft of `vision-rl` without errors (tests/jobs/records_support.py)."""
        from tests.jobs.records_support import submittable_job

        return submittable_job(team=self.owner.memberships.get().team, owner=self.owner,
                               admin=self.admin, name=name, **options)

    def pump(self) -> None:
        """What the worker and beat would do now: send queued submissions, move the
        simulator one tick, run a status pass."""
        from jobs.models import JobState, RunRecord
        from jobs.records.status import sync_submitted_jobs
        from jobs.tasks import submit_run_record

        for pk in RunRecord.objects.filter(state=JobState.QUEUED).values_list("pk", flat=True):
            submit_run_record.apply(args=[pk])
        self.sim.tick()
        sync_submitted_jobs()

    def pump_until(self, process: subprocess.Popen[bytes], limit: float = 90) -> Result:
        """Pump until `process` exits (bounded); its result."""
        deadline = time.monotonic() + limit
        while process.poll() is None and time.monotonic() < deadline:
            self.pump()
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        out, err = process.communicate(timeout=30)
        result = Result(process.returncode, out.decode(), err.decode())
        self.seen += [result.out, result.err]
        return result


@pytest.fixture(scope="module")
def _processes(django_db_setup: None, django_db_blocker: Any,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """gunicorn and the simulator, once per module (the rows are made per test: `site`)."""
    from clusters.simulator.testing import run_simulator
    from tests.conftest import DEMO_FLEET
    from tests.site import live_web

    previous = os.environ.get("RLARK_OBSERVE_REFRESH")
    os.environ["RLARK_OBSERVE_REFRESH"] = "1"
    try:
        with django_db_blocker.unblock():
            process, web = live_web.start("production",
                                          tmp_path_factory.mktemp("cli-web") / "gunicorn.log")
    finally:
        if previous is None:
            os.environ.pop("RLARK_OBSERVE_REFRESH")
        else:
            os.environ["RLARK_OBSERVE_REFRESH"] = previous
    try:
        with run_simulator(DEMO_FLEET) as sim:
            yield f"http://127.0.0.1:{web.port}", sim
    finally:
        live_web.stop(process)


SEEN: list[str] = []
SECRETS: list[str] = []


@pytest.fixture
def site(_processes: tuple[str, Any], transactional_db: None, tmp_path: Path) -> Site:
    """A team with a maintainer (token in RLARK_TOKEN), the other team's job, and the demo
    fleet registered, committed for the web process (flushed after the test)."""
    from jobs.models import Job
    from rlark_site.foundation.tenancy.models import ApiToken, MemberRole, Team
    from tests.conftest import make_user
    from tests.jobs.records_support import register_fleet

    url, sim = _processes
    team = Team.objects.create(slug="vision-rl", name="Vision RL")
    other = Team.objects.create(slug="nlp-rl", name="NLP RL")
    owner = make_user("owner", team=team, role=MemberRole.MAINTAINER)
    # the web process checks passwords with the production hashers, not the tests' MD5 one
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    owner.password = PBKDF2PasswordHasher().encode(PASSWORD, "clitestsalt", iterations=1000)
    owner.save(update_fields=["password"])
    outsider = make_user("outsider", team=other)
    admin = make_user("platform-admin", is_staff=True)
    register_fleet(sim)
    _token, secret = ApiToken.objects.create(user=owner, expiry=timedelta(days=1),
                                             name="cli-tests")
    _token, outsider_secret = ApiToken.objects.create(user=outsider, expiry=timedelta(days=1),
                                                      name="x")
    Job.objects.create(team=other, name="their-job", created_by=outsider)
    SECRETS.extend([secret, outsider_secret])
    return Site(url=url, sim=sim, config_home=tmp_path / "config", token=secret,
                outsider_token=outsider_secret, owner=owner, admin=admin, secrets=SECRETS,
                seen=SEEN)


def read_until(process: subprocess.Popen[bytes], stream: str, text: str,
               limit: float = 30) -> str:
    """Read `process`'s `stream` ("stdout" or "stderr") until `text` has been printed (an
    event, not a guessed sleep); what was read, which `communicate()` no longer returns."""
    fd = getattr(process, stream).fileno()
    got = b""
    deadline = time.monotonic() + limit
    while text.encode() not in got:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{stream} never printed {text!r}: {got.decode()!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"{stream} ended before {text!r}: {got.decode()!r}"
            got += chunk
    return got.decode()


def lines(text: str) -> Sequence[str]:
    return [line for line in text.splitlines() if line.strip()]
