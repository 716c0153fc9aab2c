"""`make stop` stops a running `make run` (by its pid file), and nothing else."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlark_site import devservices


@pytest.fixture(autouse=True)
def pidfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "run.pid"
    monkeypatch.setattr(devservices, "RUN_PIDFILE", path)
    return path


def _sleeper(*argv: str) -> Iterator[subprocess.Popen[bytes]]:
    code = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # exec'd
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def product_run() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line is that of `python -m rlark_site.devservices run`."""
    yield from _sleeper("-m", "rlark_site.devservices", "run")


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    yield from _sleeper()


def test_stop_terminates_the_running_product_and_removes_its_pid_file(
    pidfile: Path, product_run: subprocess.Popen[bytes],
) -> None:
    pidfile.write_text(f"{product_run.pid}\n")
    assert devservices.stop_product() is True
    assert product_run.wait(timeout=5) is not None
    assert not pidfile.exists()


def test_stop_leaves_a_process_that_reused_the_pid_alone(
    pidfile: Path, stranger: subprocess.Popen[bytes],
) -> None:
    pidfile.write_text(f"{stranger.pid}\n")
    assert devservices.stop_product() is False
    assert stranger.poll() is None
    assert not pidfile.exists()


def test_stop_without_a_running_product_does_nothing(pidfile: Path) -> None:
    assert devservices.stop_product() is False
    pidfile.write_text("not a pid\n")
    assert devservices.stop_product() is False


def test_a_second_run_is_refused_while_one_is_running(
    pidfile: Path, product_run: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    def start_everything() -> int:
        raise AssertionError("a second run started the product")

    monkeypatch.setattr(devservices, "_run_product", start_everything)
    pidfile.write_text(f"{product_run.pid}\n")
    with pytest.raises(SystemExit, match=f"already running \\(pid {product_run.pid}\\)"):
        devservices.run_product()
    assert product_run.poll() is None
    assert pidfile.read_text() == f"{product_run.pid}\n"
