"""The manifest renderer: golden output, determinism, the CRD, and the start script run in bash.

Regenerate the golden file after an intended change with
``RLARK_UPDATE_GOLDEN=1 .venv/bin/pytest tests/jobs/test_render.py`` and review the diff.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from jobs.core import render as render_module
from jobs.core.findings import check, has_errors
from jobs.core.render import build_manifest, dump_yaml, render_manifest
from jobs.core.spec import CheckContext, EnvVar, JobSpec, Mount, ResourcePair
from jobs.core.startscript import RESERVED_ENV_NAMES, heredoc_delimiter, rank_offsets
from tests.jobs.fleet_context import (
    ALICE_KEY,
    BOB_KEY,
    CRD_PATH,
    clean_context,
    clean_spec,
    with_role,
)

GOLDEN = Path(__file__).parent / "golden" / "rl-3role.yaml"


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def json_schema(schema: Any) -> Any:
    """The CRD schema as JSON Schema: x-kubernetes-* extensions dropped."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: value if key == "enum" else json_schema(value)
        for key, value in schema.items()
        if not key.startswith("x-kubernetes-")
    }


CRD_VALIDATOR = jsonschema.Draft4Validator(json_schema(crd_schema()))


def undeclared_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths in `value` that the schema does not declare (preserve-unknown does not count)."""
    if isinstance(value, list):
        items = schema.get("items", {})
        return [p for i, item in enumerate(value) for p in undeclared_fields(item, items, path)]
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        child = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
        if key in ("apiVersion", "kind", "metadata") and not path:
            continue
        if not isinstance(child, dict):
            found.append(f"{path}.{key}")
        else:
            found += undeclared_fields(item, child, f"{path}.{key}")
    return found


def clean() -> tuple[JobSpec, CheckContext]:
    spec = clean_spec(ssh_keys=(ALICE_KEY, BOB_KEY))
    return spec, clean_context(spec)


def tasks(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return manifest["spec"]["tasks"]


def script_of(manifest: dict[str, Any], index: int) -> str:
    return tasks(manifest)[index]["template"]["spec"]["containers"][0]["args"][0]


# -- golden ------------------------------------------------------------------------------------


def test_the_clean_job_renders_the_golden_file() -> None:
    spec, ctx = clean()
    assert not has_errors(check(spec, ctx))
    text = build_manifest(spec, ctx).yaml
    if os.environ.get("RLARK_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_metadata_namespace_labels_and_annotations() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    metadata = manifest["metadata"]
    assert (manifest["apiVersion"], manifest["kind"]) == ("rlinf.io/v1alpha1", "Job")
    assert (metadata["name"], metadata["namespace"]) == ("ppo-math-7b", "rl-gpu-a")
    assert metadata["labels"] == {
        "app.kubernetes.io/managed-by": "rlark",
        "rlinf.io/team": "vision-rl",
    }
    annotations = metadata["annotations"]
    assert annotations["rlinf.io/launch-list"] == "12"
    assert annotations["rlinf.io/deployment-parameters"] == "7"
    spec_yaml = dump_yaml(manifest["spec"]).encode("utf-8")
    assert annotations["rlark.io/spec-sha256"] == hashlib.sha256(spec_yaml).hexdigest()


def test_namespace_is_that_of_the_first_matched_node_by_cluster_then_name() -> None:
    spec = with_role(
        clean_spec(), 0, cluster="cpu-c", selector=(("kubernetes.io/hostname", "c-env-03"),)
    )
    assert render_manifest(spec, clean_context(spec))["metadata"]["namespace"] == "rl-cpu-c"


def test_one_task_per_role_in_role_order() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    assert [(t["name"], t["head"], t["replicas"]) for t in tasks(manifest)] == [
        ("actor", True, 1),
        ("rollout", False, 12),
        ("environment", False, 10),
    ]
    assert manifest["spec"]["minAvailable"] == 23


def test_node_selector_is_exactly_the_roles_conditions_sorted() -> None:
    selector = (("topology.rlinf.io/cluster", "gpu-a"), ("rlinf.io/pool", "a100-a"))
    spec = with_role(clean_spec(), 1, selector=selector)
    pod = tasks(render_manifest(spec, clean_context(spec)))[1]["template"]["spec"]
    assert list(pod["nodeSelector"].items()) == sorted(selector)


def test_container_env_resources_and_volumes() -> None:
    spec, ctx = clean()
    pod = tasks(render_manifest(spec, ctx))[0]["template"]["spec"]
    container = pod["containers"][0]
    assert container["name"] == "main" and container["command"] == ["bash", "-c"]
    assert container["env"] == [
        {"name": "HF_HOME", "value": "/mnt/cache"},
        {"name": "RAY_TEMP_DIR", "value": "/mnt/ray"},
    ]
    extended = {"nvidia.com/gpu": "8", "rlinf.io/rdma": "4"}
    assert container["resources"] == {
        "limits": {"cpu": "32", "memory": "128Gi", **extended},
        "requests": {"cpu": "16", "memory": "64Gi", **extended},
    }
    assert container["volumeMounts"] == [
        {"name": "mount-0", "mountPath": "/mnt/models"},
        {"name": "mount-1", "mountPath": "/mnt/ckpt"},
    ]
    assert pod["volumes"] == [
        {"name": "mount-0", "hostPath": {"path": "/data/models", "type": "Directory"}},
        {
            "name": "mount-1",
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": "s3-fuse",
                        "resources": {"requests": {"storage": "1Gi"}},
                    }
                }
            },
        },
    ]


def test_a_tag_is_rendered_pinned_to_its_recorded_digest() -> None:
    digest = "sha256:" + "0c" * 32
    roles = tuple(
        replace(r, image="registry.example.com/rlinf/rlinf:v0.3", image_digest=digest)
        for r in clean_spec().roles
    )
    spec = clean_spec(roles=roles)
    container = tasks(render_manifest(spec, clean_context(spec)))[0]["template"]["spec"][
        "containers"
    ][0]
    assert container["image"] == f"registry.example.com/rlinf/rlinf:v0.3@{digest}"


def test_job_level_fields_are_omitted_when_not_given() -> None:
    roles = tuple(r for r in clean_spec().roles if r.cluster == "gpu-a")
    spec = clean_spec(roles=roles, network_domain="", ssh_keys=(), tensorboard_log_dir="")
    job = render_manifest(spec, clean_context(spec))["spec"]
    assert list(job) == ["minAvailable", "tasks"]


def test_job_level_fields() -> None:
    spec, ctx = clean()
    job = render_manifest(spec, ctx)["spec"]
    assert job["networkDomain"] == "rl-mesh"
    assert job["sshAuthorizedKeys"] == [ALICE_KEY, BOB_KEY]
    assert job["tensorboard"] == {"logDir": "/mnt/ckpt/tb"}


# -- ranks and the script's order --------------------------------------------------------------


def test_rank_offsets_put_the_head_first_then_roles_in_order() -> None:
    assert rank_offsets(replicas=[1, 12, 10], head_index=0) == [0, 1, 13]
    assert rank_offsets(replicas=[12, 1, 10], head_index=1) == [1, 0, 13]
    assert rank_offsets(replicas=[4, 2, 1], head_index=2) == [1, 5, 0]


def test_scripts_carry_the_rank_offsets_and_the_head_address() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    for index, offset in enumerate([0, 1, 13]):
        script = script_of(manifest, index)
        assert f"export RLINF_NODE_RANK=$(( {offset} + RLINF_TASK_INDEX ))" in script
        assert "export RLINF_NUM_NODES=23" in script
        assert "export RLINF_HEAD_ADDRESS=ppo-math-7b-actor-0.ppo-math-7b.rl-mesh" in script


def test_head_script_order() -> None:
    spec, ctx = clean()
    script = script_of(render_manifest(spec, ctx), 0)
    steps = [
        "export RLINF_NODE_RANK=",
        "authorized_keys",
        '. "${RLARK_SCRIPT_DIR}/prepare.sh"',
        'ray start --head --port=6379 --disable-usage-stats --temp-dir="${RAY_TEMP_DIR}"',
        "python - <<'RLARK_CLUSTER_CHECK'",
        'exec bash "${RLARK_SCRIPT_DIR}/run.sh"',
    ]
    positions = [script.index(step) for step in steps]
    assert positions == sorted(positions)
    assert script.rstrip().endswith('exec bash "${RLARK_SCRIPT_DIR}/run.sh"')


def test_worker_scripts_join_the_head_and_never_run_the_run_script() -> None:
    spec, ctx = clean()
    script = script_of(render_manifest(spec, ctx), 1)
    assert script.rstrip().endswith('exec ray start --address="${RLINF_HEAD_ADDRESS}:6379" --block')
    assert "--head" not in script and "run.sh" not in script and "python -" not in script
    assert "python -m rlinf.train" not in script


# -- determinism and YAML ----------------------------------------------------------------------


def test_rendering_twice_is_byte_identical() -> None:
    spec, ctx = clean()
    first, second = build_manifest(spec, ctx), build_manifest(spec, ctx)
    assert first.yaml == second.yaml and first.sha256 == second.sha256
    assert first.sha256 == hashlib.sha256(first.yaml.encode("utf-8")).hexdigest()


def test_output_does_not_depend_on_insertion_order() -> None:
    spec = clean()[0]
    roles = list(spec.roles)
    roles[1] = replace(
        roles[1],
        selector=tuple(
            reversed((("rlinf.io/pool", "a100-a"), ("topology.rlinf.io/cluster", "gpu-a")))
        ),
        devices=(("rlinf.io/rdma", 2), ("rlinf.io/x", 1)),
    )
    forward = replace(spec, roles=tuple(roles))
    roles[1] = replace(
        roles[1],
        selector=tuple(reversed(roles[1].selector)),
        devices=tuple(reversed(roles[1].devices)),
    )
    backward = replace(spec, roles=tuple(roles))
    ctx_forward = clean_context(forward)
    ctx_backward = replace(
        clean_context(backward),
        clusters=dict(reversed(ctx_forward.clusters.items())),
        matches=dict(reversed(ctx_forward.matches.items())),
        verifications=dict(reversed(ctx_forward.verifications.items())),
    )
    assert build_manifest(forward, ctx_forward).yaml == build_manifest(backward, ctx_backward).yaml


def test_yaml_round_trips_and_is_one_document_without_tags_or_anchors() -> None:
    spec, ctx = clean()
    manifest = build_manifest(spec, ctx)
    assert yaml.safe_load(manifest.yaml) == manifest.data
    assert len(list(yaml.safe_load_all(manifest.yaml))) == 1
    assert "!!" not in manifest.yaml and "&id" not in manifest.yaml


def test_scripts_are_literal_blocks() -> None:
    spec, ctx = clean()
    assert (
        "args:\n          - |\n            # RLark start script" in build_manifest(spec, ctx).yaml
    )


def test_shared_objects_are_not_anchored() -> None:
    shared = {"a": [1, 2]}
    assert "&" not in dump_yaml({"x": shared, "y": shared})


@pytest.mark.parametrize(
    "value",
    ["y", "N", "yes", "Off", "null", "~", "1e3", "0o17", "0x1F", "8", "-.5", ".inf", "=", "<<"],
)
def test_values_other_yaml_readers_could_retype_are_quoted(value: str) -> None:
    text = dump_yaml({"k": value})
    assert text in (f"k: '{value}'\n", f'k: "{value}"\n')
    assert yaml.safe_load(text) == {"k": value}


AWKWARD = [
    "line\r\nwindows",
    "next\x85line",
    "sep\u2028arator",
    "tab\tinside\nand more",
    "trailing  \nspaces \n",
    "---\n...\n--- x\n",
    " leading space\nsecond",
    "\n\nleading breaks",
    "ends without newline\nlast",
    "many trailing\n\n\n",
    "\ufeffbom\nx",
    "nul\x00inside\nx",
    "ls\u2028single line",
    "ps\u2029",
    "\x85",
    "\n",
    "\n\n",
    " ",
    "a \nb",
    "emoji 🚀\nline",
    "tab\t",
]


@pytest.mark.parametrize("value", AWKWARD)
def test_awkward_strings_round_trip(value: str) -> None:
    assert yaml.safe_load(dump_yaml({"k": [value]})) == {"k": [value]}


# -- the CRD -----------------------------------------------------------------------------------


def test_rendered_manifest_validates_against_the_crd() -> None:
    spec, ctx = clean()
    errors = [e.message for e in CRD_VALIDATOR.iter_errors(render_manifest(spec, ctx))]
    assert errors == []


def test_every_rendered_field_is_declared_in_the_crd() -> None:
    spec, ctx = clean()
    assert undeclared_fields(render_manifest(spec, ctx), crd_schema()) == []


def test_the_crd_rejects_a_job_without_tasks_or_with_zero_replicas() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    assert not CRD_VALIDATOR.is_valid({**manifest, "spec": {"minAvailable": 1, "tasks": []}})
    tasks(manifest)[1]["replicas"] = 0
    assert not CRD_VALIDATOR.is_valid(manifest)


def structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    problems = []
    if "x-kubernetes-int-or-string" in schema:
        return [] if schema.get("anyOf") == [{"type": "integer"}, {"type": "string"}] else [path]
    if "type" not in schema:
        problems.append(path or "/")
    for key, child in schema.get("properties", {}).items():
        problems += structural_problems(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            problems += structural_problems(schema[key], f"{path}[{key}]")
    return problems


def test_the_crd_is_a_structural_namespaced_v1alpha1_definition() -> None:
    crd = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "jobs.rlinf.io"
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert {c["jsonPath"] for c in version["additionalPrinterColumns"]} >= {".status.phase"}
    assert structural_problems(crd_schema()) == []


# -- the start script, run by bash -------------------------------------------------------------

STUB_RAY = """#!/usr/bin/env bash
printf 'ray %s\\n' "$*" >> "$STUB_LOG"
"""
STUB_PYTHON_RAY = """
import os

def init(**kwargs):
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(f"ray.init {kwargs['address']}\\n")

def nodes():
    return [{"Alive": True}] * int(os.environ["STUB_RAY_NODES"])

def shutdown():
    pass
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    """A PATH with stub `ray` and `python` (a real interpreter seeing a stub `ray` module)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ray").write_text(STUB_RAY)
    (bin_dir / "ray").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    module = tmp_path / "stubs" / "ray"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text(STUB_PYTHON_RAY)
    (tmp_path / "home").mkdir()
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "stubs"),
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
        "STUB_LOG": str(tmp_path / "log"),
        "STUB_RAY_NODES": "23",
    }


def run_script(script: str, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run(
        [bash, "-c", script], env={**env, **extra}, capture_output=True, text=True, timeout=60
    )


def log_lines(env: dict[str, str]) -> list[str]:
    return Path(env["STUB_LOG"]).read_text().splitlines()


def test_head_script_runs_in_order_in_bash(sandbox: dict[str, str]) -> None:
    prepare = (
        'printf "prepare rank=%s head=%s\\n" "$RLINF_NODE_RANK" "$RLINF_IS_HEAD" >> "$STUB_LOG"'
    )
    run = 'printf "run rank=%s pwd=%s\\n" "$RLINF_NODE_RANK" "$PWD" >> "$STUB_LOG"'
    spec = with_role(clean_spec(run_script=f"cd /\n{run}\n"), 0, prepare_script=prepare)
    script = script_of(render_manifest(spec, clean_context(spec)), 0)
    result = run_script(script, sandbox, RLINF_TASK_INDEX="0", RAY_TEMP_DIR="/mnt/ray")
    assert result.returncode == 0, result.stderr
    assert log_lines(sandbox) == [
        "prepare rank=0 head=1",
        "ray start --head --port=6379 --disable-usage-stats --temp-dir=/mnt/ray",
        "ray.init ppo-math-7b-actor-0.ppo-math-7b.rl-mesh:6379",
        "run rank=0 pwd=/",
    ]
    assert "cluster check passed: 23/23" in result.stderr
    keys = Path(sandbox["HOME"], ".ssh", "authorized_keys").read_text()
    assert keys == ALICE_KEY + "\n"


def test_cluster_check_timeout_warns_and_the_run_script_still_runs(
    sandbox: dict[str, str],
) -> None:
    spec = with_role(clean_spec(run_script='echo ran >> "$STUB_LOG"\n'), 0, prepare_script="")
    script = script_of(render_manifest(spec, clean_context(spec)), 0)
    result = run_script(
        script,
        sandbox,
        RLINF_TASK_INDEX="0",
        STUB_RAY_NODES="5",
        RLINF_CLUSTER_CHECK_TIMEOUT="0",
        RAY_TEMP_DIR="/mnt/ray",
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING: only 5/23 Ray nodes" in result.stderr
    assert log_lines(sandbox)[-1] == "ran"


def test_a_failing_cluster_check_warns_and_continues(sandbox: dict[str, str]) -> None:
    spec = with_role(clean_spec(run_script='echo ran >> "$STUB_LOG"\n'), 0, prepare_script="")
    script = script_of(render_manifest(spec, clean_context(spec)), 0)
    result = run_script(
        script,
        sandbox,
        RLINF_TASK_INDEX="0",
        STUB_RAY_NODES="not a number",
        RAY_TEMP_DIR="/mnt/ray",
    )
    assert result.returncode == 0, result.stderr
    assert "cluster check did not pass" in result.stderr
    assert log_lines(sandbox)[-1] == "ran"


@pytest.mark.parametrize(("index", "rank"), [("0", "1"), ("3", "4"), ("011", "12")])
def test_worker_rank_comes_from_the_replica_index(
    sandbox: dict[str, str], index: str, rank: str
) -> None:
    spec = with_role(clean_spec(), 1, prepare_script='echo "rank=$RLINF_NODE_RANK" >> "$STUB_LOG"')
    script = script_of(render_manifest(spec, clean_context(spec)), 1)
    result = run_script(script, sandbox, RLINF_TASK_INDEX=index)
    assert result.returncode == 0, result.stderr
    address = "ppo-math-7b-actor-0.ppo-math-7b.rl-mesh:6379"
    assert log_lines(sandbox) == [
        f"rank={rank}",
        f"ray health-check --address={address}",
        f"ray start --address={address} --block",
    ]


@pytest.mark.parametrize("index", ["", "12", "-1", "x", "1 ", "99999999999999999999"])
def test_a_bad_replica_index_stops_the_pod(sandbox: dict[str, str], index: str) -> None:
    spec, ctx = clean()
    result = run_script(script_of(render_manifest(spec, ctx), 1), sandbox, RLINF_TASK_INDEX=index)
    assert result.returncode == 64
    assert not Path(sandbox["STUB_LOG"]).exists()


@pytest.mark.parametrize("index", [0, 1])
def test_an_image_without_ray_fails_fast(sandbox: dict[str, str], index: int) -> None:
    Path(sandbox["PATH"].split(":")[0], "ray").unlink()
    spec = with_role(clean_spec(), index, prepare_script="")
    script = script_of(render_manifest(spec, clean_context(spec)), index)
    assert shutil.which("ray", path=sandbox["PATH"]) is None
    result = run_script(script, sandbox, RLINF_TASK_INDEX="0", RAY_TEMP_DIR="/mnt/ray")
    assert result.returncode == 127
    assert "no ray command on PATH" in result.stderr


def test_the_prepare_script_cannot_change_the_rank(sandbox: dict[str, str]) -> None:
    spec = with_role(clean_spec(), 1, prepare_script="RLINF_NODE_RANK=0\n")
    result = run_script(
        script_of(render_manifest(spec, clean_context(spec)), 1), sandbox, RLINF_TASK_INDEX="2"
    )
    assert result.returncode != 0 and "readonly" in result.stderr


HOSTILE = [
    "EOF\n'\"`$(touch pwned)`\"'\n",
    "RLARK_RUN\nRLARK_PREPARE_0123456789abcdef\nRLARK_CLUSTER_CHECK\nexit 0\n",
    "cat <<'X'\nunterminated heredoc\n",
    "( { [ unbalanced\n\\",
    "---\n...\n--- !!python/object:os.system\n&anchor *alias\n",
    "no trailing newline; echo $HOME",
    "tab\tand trailing  \ncrlf\r\nunicode ✓ 中文 \u2028 \x85 end",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_user_scripts_reach_their_files_verbatim(sandbox: dict[str, str], hostile: str) -> None:
    prepare = 'cat "${BASH_SOURCE[0]}" > "$HOME/prepare.copy"\nreturn 0\n' + hostile
    run = 'cat "$0" > "$HOME/run.copy"\nexit 0\n' + hostile
    spec = with_role(clean_spec(run_script=run), 0, prepare_script=prepare)
    ctx = clean_context(spec)
    assert not has_errors(check(spec, ctx))
    manifest = build_manifest(spec, ctx)
    assert yaml.safe_load(manifest.yaml) == manifest.data
    result = run_script(
        script_of(manifest.data, 0), sandbox, RLINF_TASK_INDEX="0", RAY_TEMP_DIR="/mnt/ray"
    )
    assert result.returncode == 0, result.stderr
    home = Path(sandbox["HOME"])
    assert (home / "prepare.copy").read_bytes().decode() == with_newline(prepare)
    assert (home / "run.copy").read_bytes().decode() == with_newline(run)
    assert not (home / "pwned").exists() and not Path("pwned").exists()


def with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def test_heredoc_delimiters_never_occur_as_a_line_of_the_content() -> None:
    content = "RLARK_RUN\nRLARK_RUN_\n"
    delimiter = heredoc_delimiter(label="RUN", content=content)
    assert delimiter.startswith("RLARK_RUN_") and delimiter not in content.split("\n")
    assert heredoc_delimiter(label="RUN", content=content + delimiter + "\n") != delimiter


def test_ssh_key_comments_cannot_break_out(sandbox: dict[str, str]) -> None:
    key = ALICE_KEY.rsplit(" ", 1)[0] + " '; touch \"$HOME/pwned\"; echo '$(id)`id`"
    spec = clean_spec(ssh_keys=(key,))
    ctx = clean_context(spec)
    assert not has_errors(check(spec, ctx))
    result = run_script(script_of(render_manifest(spec, ctx), 2), sandbox, RLINF_TASK_INDEX="0")
    assert result.returncode == 0, result.stderr
    home = Path(sandbox["HOME"])
    assert (home / ".ssh" / "authorized_keys").read_text() == key + "\n"
    assert not (home / "pwned").exists()


def test_reserved_names_cover_every_variable_the_script_exports() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    exported = set()
    for index in range(3):
        for line in script_of(manifest, index).splitlines():
            if line.startswith("export "):
                exported.add(line.split()[1].split("=")[0])
    assert exported - {"RLINF_CLUSTER_CHECK_TIMEOUT"} <= RESERVED_ENV_NAMES


def test_host_path_and_object_storage_volumes_render_as_standard_sources() -> None:
    spec = with_role(
        clean_spec(),
        2,
        mounts=(Mount(kind="object_storage", storage_class="nfs", target="/mnt/env", size="50Gi"),),
    )
    volume = tasks(render_manifest(spec, clean_context(spec)))[2]["template"]["spec"]["volumes"][0]
    claim = volume["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "nfs"
    assert claim["resources"]["requests"]["storage"] == "50Gi"


def pure_python_dump(data: Any) -> str:
    return render_module._dump(data, render_module._PurePythonDumper)


def test_libyaml_is_used_and_pyyamls_own_emitter_writes_the_same_bytes() -> None:
    assert yaml.__with_libyaml__
    spec, ctx = clean()
    manifest = build_manifest(spec, ctx)
    assert pure_python_dump(manifest.data) == manifest.yaml


@pytest.mark.parametrize("value", AWKWARD)
def test_both_emitters_agree_on_awkward_strings(value: str) -> None:
    assert pure_python_dump({"k": [value]}) == dump_yaml({"k": [value]})


@pytest.mark.parametrize("value", AWKWARD)
def test_awkward_strings_as_the_last_scalar_of_the_manifest(value: str) -> None:
    spec = with_role(
        clean_spec(),
        2,
        env=(EnvVar("X", value),),
        mounts=(),
        devices=(),
        cpu=ResourcePair(),
        memory=ResourcePair(),
    )
    manifest = build_manifest(spec, clean_context(spec))
    assert manifest.yaml == dump_yaml(manifest.data)
    assert list(yaml.safe_load_all(manifest.yaml)) == [manifest.data]
    assert "\n..." not in manifest.yaml


def test_lone_surrogates_are_escaped_not_raised() -> None:
    text = dump_yaml({"k": "\ud800 and\nmore"})
    assert text.encode("utf-8") and yaml.safe_load(text) == {"k": "\ud800 and\nmore"}
