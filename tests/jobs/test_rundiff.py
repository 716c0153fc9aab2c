"""The semantic run diff: changes by role and field, the job name's own changes left out."""

from __future__ import annotations

from pathlib import Path

import yaml

from jobs.records.rundiff import semantic_diff

EXAMPLE = (Path(__file__).resolve().parents[2] / "deploy/examples/rl-3role.yaml").read_text()
NAME = yaml.safe_load(EXAMPLE)["metadata"]["name"]


def _renamed(text: str, name: str) -> str:
    return text.replace(NAME, name)


def _edited(edit: object) -> str:
    manifest = yaml.safe_load(EXAMPLE)
    edit(manifest)  # type: ignore[operator]
    return yaml.safe_dump(manifest, sort_keys=False)


def test_a_renamed_run_has_no_changes() -> None:
    diff = semantic_diff(old_yaml=EXAMPLE, old_name=NAME,
                         new_yaml=_renamed(EXAMPLE, "ppo-math-7b-2"), new_name="ppo-math-7b-2")
    assert diff.empty
    assert diff.as_dict() == {"job": [], "roles": []}


def _container(manifest: dict, task: int) -> dict:
    return manifest["spec"]["tasks"][task]["template"]["spec"]["containers"][0]


def test_each_field_is_named_under_its_role() -> None:
    def edit(manifest: dict) -> None:
        rollout = manifest["spec"]["tasks"][1]
        _container(manifest, 1)["image"] = "registry.example.com/rlinf/rlinf@sha256:" + "cd" * 32
        _container(manifest, 1)["env"] = [{"name": "HF_HOME", "value": "/mnt/other"}]
        rollout["replicas"] = 3
        rollout["template"]["spec"]["nodeSelector"]["rlinf.io/pool"] = "a100-b"
        manifest["spec"]["tensorboard"] = {"logDir": "/mnt/tb2"}

    diff = semantic_diff(old_yaml=EXAMPLE, old_name=NAME, new_yaml=_edited(edit), new_name=NAME)
    (rollout,) = diff.roles
    assert rollout.role == yaml.safe_load(EXAMPLE)["spec"]["tasks"][1]["name"]
    assert [f.field for f in rollout.fields] == ["image", "selector", "replicas", "env"]
    assert [f.field for f in diff.job] == ["tensorboard"]


def test_scripts_changes_come_with_their_lines_and_roles_added_or_removed() -> None:
    old = yaml.safe_load(EXAMPLE)

    def edit(manifest: dict) -> None:
        args = _container(manifest, 0)["args"]
        args[0] = args[0].replace("source /opt/venv/bin/activate", "source /opt/rl/bin/activate", 1)
        manifest["spec"]["tasks"].pop()

    diff = semantic_diff(old_yaml=EXAMPLE, old_name=NAME, new_yaml=_edited(edit), new_name=NAME)
    changed, removed = diff.roles
    assert (removed.role, removed.change) == (old["spec"]["tasks"][-1]["name"], "removed")
    (script,) = changed.fields
    assert script.field == "prepare_script"
    assert "-source /opt/venv/bin/activate" in script.lines
    assert "+source /opt/rl/bin/activate" in script.lines
