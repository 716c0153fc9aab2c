"""Every module of rlark_site sits in one of its two layers of the import contract.

pyproject.toml's layers contract splits rlark_site into the project's wiring (above the apps)
and the site-wide bottom (below them); a module in neither would escape the contract.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _layers() -> list[set[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers"]
    return [set(re.findall(r"[\w.]+", layer)) for layer in contract["layers"]]


def test_every_rlark_site_module_is_wiring_or_bottom() -> None:
    wiring, jobs, clusters, bottom = _layers()
    assert (jobs, clusters, bottom) == ({"jobs"}, {"clusters"}, {"rlark_site.foundation"})
    package = REPO / "rlark_site"
    modules = {f"rlark_site.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {f"rlark_site.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert modules == wiring | bottom
