"""Properties of the engine and the renderer over random and hostile drafts (hypothesis).

1. Anything at all (wrong types, huge or hostile strings): `check` never raises, its
   findings serialise, and the renderer and dumper do not raise either.
2. Drafts close to valid, with hostile text where users type freely (scripts, env values,
   key comments, paths): whenever the engine reports no error, the manifest round-trips
   through YAML unchanged, is one document, validates against the CRD, and has exactly
   the keys the contract lists, so user text cannot add or move a key.
3. For a few of those: the start script, run by bash, writes the user's scripts verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobs.core.findings import check, has_errors
from jobs.core.render import build_manifest, dump_yaml, render_manifest
from jobs.core.spec import EnvVar, JobSpec, Mount, ResourcePair, RoleSpec
from jobs.core.startscript import RAY_TEMP_DIR_ENV, RESERVED_ENV_NAMES, TUNABLE_ENV_NAMES
from rlark_site.foundation.findings import Finding
from tests.jobs.fleet_context import (
    ALICE_KEY,
    BOB_KEY,
    CAROL_KEY,
    DIGEST,
    IMAGE,
    clean_context,
)
from tests.jobs.test_render import CRD_VALIDATOR, STUB_PYTHON_RAY, STUB_RAY

# libyaml's loader when present (PyYAML's own is much slower; tests/jobs/test_render.py
# round-trips through it too).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Keep the whole module to a few seconds.
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASH = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPECIAL_LINES = [
    "---",
    "...",
    "--- !!python/object/apply:os.system ['id']",
    "EOF",
    "'",
    '"',
    "`id`",
    "$(id)",
    "cat <<'EOF'",
    "RLARK_RUN",
    "RLARK_PREPARE_0123456789abcdef",
    "RLARK_CLUSTER_CHECK",
    "key: value",
    "- item",
    "&anchor *alias",
    "? complex",
    "%YAML 1.1",
    "# comment",
    "\t indented with a tab",
    "trailing spaces   ",
    "crlf\r",
    "nel\x85 and ls\u2028 and ps\u2029",
    "\ufeffbom",
    "y",
    "1e3",
    "中文 ✓ emoji 🚀",
    "",
]

any_text = st.text(alphabet=st.characters(), max_size=40)  # surrogates and NUL included
safe_char = st.characters(codec="utf-8", blacklist_characters="\x00")
safe_text = st.text(alphabet=safe_char, max_size=60)
huge_text = st.builds(
    lambda c, n: c * n, st.sampled_from(["x", "\n", "é", "'", "-"]), st.integers(0, 20_000)
)
hostile_text = st.lists(st.one_of(st.sampled_from(SPECIAL_LINES), safe_text), max_size=8).map(
    "\n".join
)


WILD_LEAVES = st.one_of(
    any_text,
    st.sampled_from(SPECIAL_LINES),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)
WILD = st.one_of(
    WILD_LEAVES, st.lists(WILD_LEAVES, max_size=2), st.tuples(WILD_LEAVES, WILD_LEAVES)
)


def wild() -> st.SearchStrategy[Any]:
    return WILD


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, wild())


@st.composite
def wild_role(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 12)) == 0:
        return draw(wild())
    return RoleSpec(
        name=draw(maybe(st.sampled_from(["Actor", "Rollout", "Environment", "actor"]))),
        cluster=draw(maybe(st.sampled_from(["gpu-a", "gpu-b", "cpu-c", ""]))),
        selector=draw(
            maybe(
                st.lists(
                    st.tuples(
                        maybe(st.just("rlinf.io/pool")),
                        maybe(st.sampled_from(["a100-a", "env-c", "h100-b"])),
                    ),
                    max_size=3,
                ).map(tuple)
            )
        ),
        gpus=draw(wild()),
        devices=draw(
            maybe(
                st.lists(st.tuples(maybe(st.just("rlinf.io/rdma")), wild()), max_size=2).map(tuple)
            )
        ),
        cpu=draw(maybe(st.builds(ResourcePair, wild(), wild()))),
        memory=draw(maybe(st.builds(ResourcePair, wild(), wild()))),
        image=draw(maybe(st.just(IMAGE))),
        image_digest=draw(wild()),
        prepare_script=draw(st.one_of(wild(), huge_text)),
        env=draw(maybe(st.lists(st.builds(EnvVar, wild(), wild()), max_size=3).map(tuple))),
        mounts=draw(
            maybe(
                st.lists(st.builds(Mount, wild(), wild(), wild(), wild(), wild()), max_size=3).map(
                    tuple
                )
            )
        ),
    )


@st.composite
def wild_spec(draw: st.DrawFn) -> JobSpec:
    return JobSpec(
        team=draw(maybe(st.just("vision-rl"))),
        name=draw(maybe(st.just("ppo-math-7b"))),
        task_type=draw(maybe(st.just("rl"))),
        roles=draw(st.one_of(st.lists(wild_role(), max_size=3).map(tuple), wild())),
        header_role=draw(maybe(st.just("Actor"))),
        network_domain=draw(maybe(st.just("rl-mesh"))),
        ssh_keys=draw(maybe(st.lists(maybe(st.just(ALICE_KEY)), max_size=2).map(tuple))),
        run_script=draw(st.one_of(wild(), huge_text)),
        tensorboard_log_dir=draw(wild()),
        image_compatibility_confirmed=draw(wild()),
        launch_list_id=draw(wild()),
        deployment_parameters_id=draw(wild()),
    )


def assert_well_formed(findings: list[Finding]) -> None:
    for finding in findings:
        assert isinstance(finding, Finding) and finding.severity in ("error", "warning")
        assert finding.field is None or isinstance(finding.field, str)
        assert finding.role is None or isinstance(finding.role, str)
    json.dumps([finding.as_dict() for finding in findings])


@FAST
@given(spec=wild_spec())
def test_the_engine_and_renderer_never_raise(spec: JobSpec) -> None:
    ctx = clean_context(spec)
    findings = check(spec, ctx)
    assert_well_formed(findings)
    assert findings == check(spec, ctx)
    build_manifest(spec, ctx)


# -- near-valid drafts -----------------------------------------------------------------------

# (cluster, selector, max GPUs, device, storage class) that the demo fleet answers cleanly.
WORKER_PLACEMENTS = [
    ("gpu-a", (("rlinf.io/pool", "a100-a"),), 8, "rlinf.io/rdma", "s3-fuse"),
    ("gpu-b", (("rlinf.io/pool", "h100-b"),), 8, "rlinf.io/rdma", "ceph-rbd"),
    (
        "gpu-b",
        (("rlinf.io/pool", "a100-b"), ("rlinf.io/zone", "zone-1")),
        4,
        "rlinf.io/rdma",
        "s3-fuse",
    ),
    ("cpu-c", (("rlinf.io/pool", "env-c"),), 0, "rlinf.io/sim-license", "nfs"),
    ("gpu-a", (("rlinf.io/pool", "cpu-a"),), 0, None, "local-nvme"),
]
HEAD_PLACEMENTS = [
    ("gpu-a", (("kubernetes.io/hostname", "a-head-01"),), 8, "rlinf.io/rdma", "s3-fuse"),
    ("gpu-b", (("kubernetes.io/hostname", "b-node-13"),), 4, "rlinf.io/rdma", "s3-fuse"),
    ("cpu-c", (("kubernetes.io/hostname", "c-env-04"),), 0, "rlinf.io/sim-license", "nfs"),
]
RESERVED = RESERVED_ENV_NAMES | set(TUNABLE_ENV_NAMES) | {RAY_TEMP_DIR_ENV}
KEYS = [ALICE_KEY, BOB_KEY, CAROL_KEY]
TAG_IMAGE = "registry.example.com:5000/rlinf/rlinf:v0.3.1-cu124"

role_names = st.from_regex(r"[A-Za-z][-A-Za-z0-9]{0,8}[A-Za-z0-9]", fullmatch=True)
env_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda name: name not in RESERVED
)
path_char = st.characters(codec="utf-8", min_codepoint=0x20, blacklist_characters="\x7f/")
comment_char = st.characters(codec="utf-8", min_codepoint=0x20, blacklist_characters="\x7f")


@st.composite
def near_valid_role(draw: st.DrawFn, *, name: str, head: bool) -> RoleSpec:
    cluster, selector, gpu_max, device, storage_class = draw(
        st.sampled_from(HEAD_PLACEMENTS if head else WORKER_PLACEMENTS)
    )
    env_list = draw(
        st.lists(st.tuples(env_names, hostile_text), max_size=4, unique_by=lambda pair: pair[0])
    )
    mounts = [
        Mount(
            kind="object_storage",
            storage_class=storage_class,
            target="/mnt/ckpt",
            size=draw(st.sampled_from(["", "10Gi", "1.5Ti"])),
        )
    ]
    if draw(st.booleans()):
        mounts.append(Mount(kind="host_path", source="/data/models", target="/mnt/models"))
    digest = draw(st.sampled_from(["", "tag"]))
    return RoleSpec(
        name=name,
        cluster=cluster,
        selector=tuple(draw(st.permutations(selector))),
        gpus=draw(st.integers(0, gpu_max)),
        devices=((device, 1),) if device and draw(st.booleans()) else (),
        cpu=draw(st.sampled_from([ResourcePair(), ResourcePair("500m", "2"), ResourcePair("1")])),
        memory=draw(
            st.sampled_from([ResourcePair(), ResourcePair("1Gi", "4Gi"), ResourcePair(limit="1e9")])
        ),
        image=IMAGE if digest == "" else TAG_IMAGE,
        image_digest="" if digest == "" else DIGEST,
        prepare_script=draw(hostile_text),
        env=tuple(EnvVar(n, v) for n, v in env_list),
        mounts=tuple(draw(st.permutations(mounts))),
    )


@st.composite
def near_valid_spec(draw: st.DrawFn) -> JobSpec:
    names = draw(st.lists(role_names, min_size=1, max_size=4, unique_by=str.lower))
    roles = tuple(
        draw(near_valid_role(name=name, head=index == 0)) for index, name in enumerate(names)
    )
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=3))
    comments = draw(
        st.lists(
            st.text(alphabet=comment_char, max_size=30), min_size=len(keys), max_size=len(keys)
        )
    )
    log_dir = draw(
        st.one_of(
            st.just(""),
            st.text(alphabet=path_char, min_size=1, max_size=20)
            .filter(lambda p: p.strip("."))
            .map(lambda p: "/mnt/" + p),
        )
    )
    return JobSpec(
        team=draw(st.sampled_from(["vision-rl", "nlp.rl_2"])),
        name=draw(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?", fullmatch=True)),
        task_type=draw(st.sampled_from(["rl", "data_collection", "evaluation", "custom"])),
        roles=roles,
        header_role=roles[0].name,
        network_domain=draw(st.sampled_from(["rl-mesh", ""]))
        if len({r.cluster for r in roles}) == 1
        else "rl-mesh",
        ssh_keys=tuple(f"{key} {comment}" for key, comment in zip(keys, comments, strict=True)),
        run_script="python -m rlinf.train\n" + draw(hostile_text),
        tensorboard_log_dir=log_dir,
        image_compatibility_confirmed=True,
        launch_list_id=draw(st.integers(1, 10**9)),
        deployment_parameters_id=draw(st.integers(1, 10**9)),
    )


def expected_shape(spec: JobSpec) -> dict[str, Any]:
    """The key structure the contract promises for `spec` (docs/manifest.md)."""
    job = ["minAvailable"]
    job += ["networkDomain"] if spec.network_domain else []
    job += ["sshAuthorizedKeys"] if spec.ssh_keys else []
    job += ["tensorboard"] if spec.tensorboard_log_dir else []
    return {
        "top": ["apiVersion", "kind", "metadata", "spec"],
        "metadata": ["name", "namespace", "labels", "annotations"],
        "labels": ["app.kubernetes.io/managed-by", "rlinf.io/team"],
        "annotations": [
            "rlinf.io/launch-list",
            "rlinf.io/deployment-parameters",
            "rlark.io/spec-sha256",
        ],
        "job": [*job, "tasks"],
    }


def container_keys(role: RoleSpec) -> list[str]:
    keys = ["name", "image", "command", "args"]
    keys += ["env"] if role.env else []
    resources = (
        role.gpus or role.devices or role.cpu != ResourcePair() or (role.memory != ResourcePair())
    )
    keys += ["resources"] if resources else []
    keys += ["volumeMounts"] if role.mounts else []
    return keys


def assert_shape(manifest: dict[str, Any], spec: JobSpec) -> None:
    shape = expected_shape(spec)
    assert list(manifest) == shape["top"]
    assert list(manifest["metadata"]) == shape["metadata"]
    assert list(manifest["metadata"]["labels"]) == shape["labels"]
    assert list(manifest["metadata"]["annotations"]) == shape["annotations"]
    assert list(manifest["spec"]) == shape["job"]
    assert len(manifest["spec"]["tasks"]) == len(spec.roles)
    for role, task in zip(spec.roles, manifest["spec"]["tasks"], strict=True):
        assert list(task) == ["name", "head", "replicas", "template"]
        assert list(task["template"]) == ["metadata", "spec"]
        pod = task["template"]["spec"]
        pod_keys = ["restartPolicy", "nodeSelector", "containers"]
        assert list(pod) == pod_keys + (["volumes"] if role.mounts else [])
        assert pod["nodeSelector"] == dict(role.selector)
        (container,) = pod["containers"]
        assert list(container) == container_keys(role)
        assert container.get("env", []) == [{"name": e.name, "value": e.value} for e in role.env]


@FAST
@given(spec=near_valid_spec())
def test_clean_drafts_render_to_a_safe_manifest(spec: JobSpec) -> None:
    ctx = clean_context(spec)
    assume(not has_errors(check(spec, ctx)))
    manifest = build_manifest(spec, ctx)
    documents = list(yaml.load_all(manifest.yaml, Loader=LOADER))
    assert documents == [manifest.data]
    assert list(CRD_VALIDATOR.iter_errors(manifest.data)) == []
    assert_shape(manifest.data, spec)
    assert manifest.data == render_manifest(spec, ctx)
    assert dump_yaml(manifest.data) == manifest.yaml


@BASH
@given(spec=near_valid_spec())
def test_bash_writes_the_users_scripts_verbatim(spec: JobSpec, tmp_path_factory: Any) -> None:
    head = spec.roles[0]
    prepare = 'cat "${BASH_SOURCE[0]}" > "$HOME/prepare.copy"\nreturn 0\n' + head.prepare_script
    run = 'cat "$0" > "$HOME/run.copy"\nexit 0\n' + spec.run_script
    roles = (replace(head, prepare_script=prepare), *spec.roles[1:])
    spec = replace(spec, roles=roles, run_script=run)
    ctx = clean_context(spec)
    assume(not has_errors(check(spec, ctx)))
    tmp = tmp_path_factory.mktemp("bash")
    env = {**sandbox_env(tmp), **{e.name: e.value for e in head.env}}
    env.update(RLINF_TASK_INDEX="0", STUB_RAY_NODES="0", RLINF_CLUSTER_CHECK_TIMEOUT="0")
    pod = build_manifest(spec, ctx).data["spec"]["tasks"][0]["template"]["spec"]
    result = subprocess.run(
        ["bash", "-c", pod["containers"][0]["args"][0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp / "home" / "prepare.copy").read_bytes().decode() == newline(prepare)
    assert (tmp / "home" / "run.copy").read_bytes().decode() == newline(run)


def newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def sandbox_env(tmp: Path) -> dict[str, str]:
    (tmp / "bin").mkdir()
    (tmp / "bin" / "ray").write_text(STUB_RAY)
    (tmp / "bin" / "ray").chmod(0o755)
    (tmp / "bin" / "python").symlink_to(sys.executable)
    (tmp / "stubs" / "ray").mkdir(parents=True)
    (tmp / "stubs" / "ray" / "__init__.py").write_text(STUB_PYTHON_RAY)
    (tmp / "home").mkdir()
    return {
        "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp / "stubs"),
        "HOME": str(tmp / "home"),
        "TMPDIR": str(tmp),
        "STUB_LOG": str(tmp / "log"),
    }
