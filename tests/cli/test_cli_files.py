"""`rlark` login, config, validate, apply, list, status, export and the bad-input lines, run as
the installed console script against gunicorn and the simulator (tests/cli/conftest.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import PASSWORD, RLARK, Site, lines

MINIMAL = """\
apiVersion: rlark.io/v1
kind: Job
metadata:
  name: {name}
  team: vision-rl
spec:
  task_type: custom
  run_script: echo hello
"""


@pytest.fixture
def good(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An exported file of a draft without errors."""
    site.submittable("cli-good")
    result = site.run("export", "cli-good")
    assert result.code == 0, result.err
    path = tmp_path_factory.mktemp("files") / "good.yaml"
    path.write_text(result.out)
    return path


def write(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def one_error_line(result: Any) -> str:
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    return errors[0]


# -- login, whoami, config ----------------------------------------------------------------


def test_login_with_password_stdin_stores_the_token_privately(site: Site,
                                                               tmp_path: Path) -> None:
    home = tmp_path / "cfg"
    result = site.run("login", "--url", site.url, "--username", "owner", "--password-stdin",
                      stdin=PASSWORD + "\n", XDG_CONFIG_HOME=str(home), RLARK_URL="",
                      RLARK_TOKEN="")
    assert result.code == 0, result.err
    assert "as owner" in result.err
    directory, path = home / "rlark", home / "rlark" / "config.toml"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = path.read_text()
    token = stored.split('token = "')[1].split('"')[0]
    site.secrets.append(token)
    assert token not in result.out + result.err
    assert not [p for p in directory.iterdir() if p.name != "config.toml"]  # no temporary left

    whoami = site.run("whoami", "-o", "json", XDG_CONFIG_HOME=str(home), RLARK_URL="",
                      RLARK_TOKEN="")
    assert whoami.code == 0, whoami.err
    me = whoami.json()
    assert me["username"] == "owner"
    assert me["teams"] == [{"slug": "vision-rl", "name": "Vision RL", "role": "maintainer"}]
    assert me["token"]["name"].startswith("rlark-cli@")
    assert token not in whoami.out and "token" not in me["token"]

    table = site.run("whoami", XDG_CONFIG_HOME=str(home), RLARK_URL="", RLARK_TOKEN="")
    assert "user:" in table.out and "vision-rl (maintainer)" in table.out

    # a second profile; RLARK_PROFILE picks one, the last stored is current
    second = site.run("--profile", "outsider", "login", "--url", site.url, "--token", "-",
                      stdin=site.outsider_token + "\n", XDG_CONFIG_HOME=str(home),
                      RLARK_URL="", RLARK_TOKEN="")
    assert second.code == 0, second.err
    assert site.run("whoami", "-o", "json", XDG_CONFIG_HOME=str(home), RLARK_URL="",
                    RLARK_TOKEN="").json()["username"] == "outsider"
    assert site.run("whoami", "-o", "json", XDG_CONFIG_HOME=str(home), RLARK_URL="",
                    RLARK_TOKEN="", RLARK_PROFILE="default").json()["username"] == "owner"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    logout = site.run("logout", XDG_CONFIG_HOME=str(home), RLARK_URL="", RLARK_TOKEN="")
    assert logout.code == 0
    after = site.run("whoami", XDG_CONFIG_HOME=str(home), RLARK_URL="", RLARK_TOKEN="")
    assert after.code == 2 and "rlark login" in one_error_line(after)


def test_login_refusals_are_one_line_and_store_nothing(site: Site, tmp_path: Path) -> None:
    home = tmp_path / "cfg"
    env = {"XDG_CONFIG_HOME": str(home), "RLARK_URL": "", "RLARK_TOKEN": ""}
    wrong = site.run("login", "--url", site.url, "--username", "owner", "--password-stdin",
                     stdin="wrong\n", **env)
    assert wrong.code == 2
    assert "Wrong username or password" in one_error_line(wrong)
    bad_token = site.run("login", "--url", site.url, "--token", "not-a-token", **env)
    assert bad_token.code == 2
    assert "expired or was revoked" in one_error_line(bad_token)
    assert not (home / "rlark" / "config.toml").exists()
    usage = site.run("login", "--url", site.url, "--password-stdin", stdin="x\n", **env)
    assert usage.code == 2


def test_a_revoked_token_is_one_line_naming_login(site: Site) -> None:
    from rlark_site.foundation.tenancy.models import ApiToken

    _token, secret = ApiToken.objects.create(user=site.owner, expiry=None, name="revoked")
    site.secrets.append(secret)
    assert site.run("whoami", RLARK_TOKEN=secret).code == 0
    ApiToken.objects.filter(name="revoked").delete()
    result = site.run("list", RLARK_TOKEN=secret)
    assert result.code == 2
    line = one_error_line(result)
    assert "expired or was revoked" in line and "rlark login" in line
    assert secret not in result.err


def test_no_url_and_a_wrong_url_and_a_server_down(site: Site) -> None:
    none = site.run("list", RLARK_URL="")
    assert none.code == 2 and "rlark login --url" in one_error_line(none)
    wrong = site.run("list", RLARK_URL="ftp://example.com")
    assert wrong.code == 2 and "not an http(s) URL" in one_error_line(wrong)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = site.run("list", RLARK_URL=f"http://127.0.0.1:{port}")
    assert down.code == 2 and "connection refused" in one_error_line(down)
    # the site's pages but not its API: the health page is not JSON with the version header
    not_api = site.run("list", RLARK_URL=f"{site.url}/health/live#x")
    assert not_api.code == 2


# -- validate -----------------------------------------------------------------------------


def test_validate_exit_codes(site: Site, good: Path, tmp_path: Path) -> None:
    ok = site.run("validate", "-f", str(good))
    assert ok.code == 0, ok.out + ok.err
    assert "cli-good (vision-rl)" in ok.out
    with_errors = write(tmp_path, MINIMAL.format(name="cli-errors"))
    bad = site.run("validate", "-f", str(with_errors))
    assert bad.code == 1
    assert "error " in bad.out
    # the server's messages in the user's language (Accept-Language from the locale)
    chinese = site.run("validate", "-f", str(with_errors), LANG="zh_CN.UTF-8", LC_ALL="",
                       LC_MESSAGES="")
    assert chinese.code == 1
    assert any("\u4e00" <= char <= "\u9fff" for char in chinese.out)
    assert not any("\u4e00" <= char <= "\u9fff" for char in bad.out)
    # CI: several files, the shell's glob after -f; the worst code wins, each file is named
    unknown = write(tmp_path, MINIMAL.format(name="x").replace("task_type", "task_typ"),
                    "unknown.yaml")
    several = site.run("validate", "-f", str(good), str(with_errors), str(unknown), "-o",
                       "json")
    assert several.code == 2
    rows = several.json()
    assert [r["valid"] for r in rows] == [True, True, False]
    assert rows[2]["problems"][0]["suggestion"] == "task_type"
    assert f"{unknown}: line 7, column 3: spec.task_typ" in one_error_line(several)
    assert "did you mean task_type" in several.err
    # nothing stored by validate
    from jobs.models import Job

    assert not Job.objects.filter(name__in=["cli-errors", "x"]).exists()


@pytest.mark.parametrize(("content", "expected"), [
    (b"apiVersion: rlark.io/v1\nkind: Job\x00\n", "[file.nul]"),
    (b"apiVersion: rlark.io/v1\n\x01\x02binary\n", "[file.binary]"),
    (b"\xff\xfe\x00\x01" * 10, "[file."),
    (b"# padding\n" * 30_000, "[file.too_large]"),
    (b"a: [1, 2\n", "[yaml.syntax]"),
    (b"", "[file.empty]"),
])
def test_bad_files_are_one_line_with_exit_2(site: Site, tmp_path: Path, content: bytes,
                                            expected: str) -> None:
    path = write(tmp_path, content)
    for command in (["validate", "-f"], ["apply", "-f"], ["sweep", "--grid", "run_script=a",
                                                          "-f"]):
        result = site.run(*command, str(path))
        assert result.code == 2, (command, result.err)
        line = one_error_line(result)
        assert line.startswith(f"error: {path}: ") and expected in line, line


def test_a_file_that_cannot_be_sent_or_read(site: Site, tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as out:
        out.truncate(5 * 1024 * 1024)
    result = site.run("apply", "-f", str(huge))
    assert result.code == 2 and "not sent" in one_error_line(result)
    missing = site.run("validate", "-f", str(tmp_path / "nope.yaml"))
    assert missing.code == 2 and "cannot read" in one_error_line(missing)
    directory = site.run("validate", "-f", str(tmp_path))
    assert directory.code == 2 and "is a directory" in one_error_line(directory)
    usage = site.run("validate")
    assert usage.code == 2


def test_another_teams_job_name_is_not_found(site: Site, tmp_path: Path) -> None:
    theirs = write(tmp_path, MINIMAL.format(name="their-job").replace("vision-rl", "nlp-rl"))
    validate = site.run("validate", "-f", str(theirs))
    assert validate.code == 2 and "not found" in one_error_line(validate)
    for command in (["status", "their-job"], ["submit", "their-job"], ["cancel", "their-job"],
                    ["events", "their-job"], ["logs", "their-job"], ["record", "their-job"],
                    ["verify", "their-job"], ["clone", "their-job", "mine-now"],
                    ["export", "their-job"], ["status", "no-such-job"]):
        result = site.run(*command)
        assert result.code == 6, (command, result.err)
        assert "not found" in one_error_line(result)


# -- apply --------------------------------------------------------------------------------


def test_apply_creates_then_is_unchanged_then_updates(site: Site, tmp_path: Path) -> None:
    from jobs.models import Job

    path = write(tmp_path, MINIMAL.format(name="cli-apply"))
    dry = site.run("apply", "-f", str(path), "--dry-run")
    assert dry.code == 0 and "would be created" in dry.out
    assert not Job.objects.filter(name="cli-apply").exists()
    created = site.run("apply", "-f", str(path))
    assert created.code == 0, created.err
    assert lines(created.out)[0] == "job cli-apply (vision-rl) created"
    stamp = Job.objects.get(name="cli-apply").updated_at
    again = site.run("apply", "-f", str(path))
    assert lines(again.out)[0] == "job cli-apply (vision-rl) unchanged"
    assert Job.objects.get(name="cli-apply").updated_at == stamp
    path.write_text(path.read_text().replace("echo hello", "echo bye"))
    updated = site.run("apply", "-f", str(path), "-o", "json")
    assert updated.json()["action"] == "updated"
    table = site.run("apply", "-f", str(path.with_name("job.yaml")))
    assert "unchanged" in table.out
    path.write_text(path.read_text().replace("echo bye", "echo again"))
    shown = site.run("apply", "-f", str(path))
    assert "  ~ spec.run_script: echo bye -> echo again" in shown.out
    yaml_out = site.run("apply", "-f", str(path), "-o", "yaml")
    assert yaml.safe_load(yaml_out.out)["action"] == "unchanged"


def test_export_apply_under_another_name_gives_the_same_manifest(site: Site, good: Path,
                                                                 tmp_path: Path) -> None:
    from jobs.models import Job

    copy = write(tmp_path, good.read_text().replace("name: cli-good", "name: cli-good-copy"))
    assert site.run("apply", "-f", str(copy)).code == 0
    assert site.run("validate", "-f", str(copy)).code == 0

    def manifest(name: str) -> str:
        from tests.site.live_web import LiveWeb

        port = int(site.url.rsplit(":", 1)[1])
        status, _headers, body = LiveWeb("production", port, Path()).request(
            "GET", f"/api/v1/jobs/{name}/manifest/",
            headers={"Authorization": f"Token {site.token}"})
        assert status == 200
        return body.decode()

    original, copied = manifest("cli-good"), manifest("cli-good-copy")

    def without_name(text: str, name: str) -> list[str]:
        return [line.replace(name, "NAME") for line in text.splitlines()
                if "rlark.io/spec-sha256" not in line]

    assert original != copied
    assert without_name(original, "cli-good") == without_name(copied, "cli-good-copy")
    assert Job.objects.filter(name="cli-good-copy").exists()


# -- list, status -------------------------------------------------------------------------


def test_list_and_status(site: Site, good: Path) -> None:
    listed = site.run("list", "-o", "json")
    assert listed.code == 0
    names = {row["name"] for row in listed.json()}
    assert "cli-good" in names and "their-job" not in names
    table = site.run("list", "--state", "draft", "--mine")
    assert lines(table.out)[0].split()[:3] == ["NAME", "TEAM", "STATE"]
    assert "cli-good" in table.out
    assert site.run("list", "--state", "running", "-o", "json").json() == [
        row for row in listed.json() if row["state"] == "running"]
    assert len(site.run("list", "--limit", "1", "-o", "json").json()) == 1
    assert yaml.safe_load(site.run("list", "-o", "yaml").out) == listed.json()
    status = site.run("status", "cli-good")
    assert status.code == 0
    assert "state:" in status.out and "draft" in status.out
    assert site.run("status", "cli-good", "-o", "json").json()["name"] == "cli-good"
    bad = site.run("list", "--state", "nonsense")
    assert bad.code == 2


def test_help_has_an_example_for_every_command_and_completion_works(site: Site) -> None:
    result = subprocess.run([str(RLARK), "--help"], capture_output=True, text=True)
    commands = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines()
                if line.startswith("  ") and line.split() and not line.startswith("    ")]
    commands = [c for c in commands if c != "Example:"]
    assert {"login", "whoami", "validate", "apply", "list", "status", "submit", "logs",
            "events", "cancel", "record", "diff", "clone", "sweep", "match",
            "verify"} <= set(commands)
    for command in commands:
        shown = subprocess.run([str(RLARK), command, "--help"], capture_output=True, text=True)
        assert shown.returncode == 0 and "Example:" in shown.stdout, command
    script = subprocess.run([str(RLARK), "completion", "bash"], capture_output=True, text=True)
    assert "_RLARK_COMPLETE" in script.stdout
    env = {**os.environ, "_RLARK_COMPLETE": "bash_complete", "COMP_WORDS": "rlark sub",
           "COMP_CWORD": "1"}
    completed = subprocess.run([str(RLARK)], capture_output=True, text=True, env=env)
    assert "submit" in completed.stdout
    usage = subprocess.run([str(RLARK), "no-such-command"], capture_output=True, text=True)
    assert usage.returncode == 2


def test_no_token_was_ever_printed() -> None:
    """Last in the module: nothing any command of the module printed showed a token."""
    from tests.cli.conftest import SECRETS, SEEN

    assert SEEN and SECRETS
    for secret in SECRETS:
        assert not [text for text in SEEN if secret in text]
