"""`make test PYTEST_ARGS=...`: pytest's options reach pytest in any order."""

from __future__ import annotations

import pytest

from rlark_site import devservices


@pytest.mark.parametrize(
    "args",
    [["-x", "tests/jobs"], ["tests/jobs", "-x"], ["-k", "name and not slow", "-q"], []],
)
def test_everything_after_test_goes_to_pytest(args: list[str], monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    received: list[list[str]] = []
    monkeypatch.setattr(devservices, "run_tests", lambda pytest_args: received.append(pytest_args)
                        or 0)
    monkeypatch.setattr(devservices, "_interrupt_on_termination", lambda: None)

    assert devservices.main(["test", *args]) == 0
    assert received == [args]
