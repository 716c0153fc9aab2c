"""The Dockerfile lints clean with hadolint and builds the image docs/deploy.md describes."""

from __future__ import annotations

import re
import subprocess

from tests.deploy.conftest import RLARK, tool

DOCKERFILE = RLARK / "Dockerfile"


def _stages() -> list[str]:
    return re.split(r"^FROM ", DOCKERFILE.read_text(), flags=re.MULTILINE)[1:]


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run([tool("hadolint"), "--failure-threshold", "style", str(DOCKERFILE)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: object) -> None:
    result = subprocess.run([tool("hadolint"), "-"], input="FROM python:latest\nRUN cd /x\n",
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "DL3007" in result.stdout


def test_the_build_is_multi_stage_and_collects_static_files_in_the_build_stage() -> None:
    build, runtime = _stages()
    assert "collectstatic" in build
    assert "COPY --from=build" in runtime
    assert "pip install" not in runtime


def test_the_runtime_stage_runs_as_a_non_root_user_through_the_entrypoint() -> None:
    runtime = _stages()[-1]
    users = re.findall(r"^USER (\S+)", runtime, flags=re.MULTILINE)
    assert users and not users[-1].startswith(("root", "0"))
    assert 'ENTRYPOINT ["/app/deploy/rlark/entrypoint.sh"]' in runtime
