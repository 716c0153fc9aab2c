"""The job-file parser and overrides (pure): every kind of bad file gives its code, its place
(line and column) and, for a wrong key, the nearest one; the schema is the serializer's."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from jobs.core.jobfile import MAX_FILE_BYTES, JobFileError, check_document, parse_job_file
from jobs.core.overrides import Override, apply_override, overridden, parse_override, split_values
from jobs.drafts.serializers import JobDraftSerializer
from jobs.jobfiles.document import document_of, dump_job_file
from jobs.jobfiles.schema import SCHEMA_ID, job_file_schema, spec_field_names

SPEC: dict[str, Any] = {
    "task_type": "rl",
    "header_role": "Actor",
    "roles": [
        {"name": "Actor", "cluster": "gpu-a", "selector": {"rlinf.io/pool": "a100-a"},
         "gpus": 8, "devices": {"rlinf.io/rdma": 1}, "cpu": {"request": "16", "limit": 32},
         "image": "r/x@sha256:" + "ab" * 32, "prepare_script": "set -e\ncd /w\n",
         "env": [{"name": "LR", "value": "on"}],
         "mounts": [{"kind": "host_path", "source": "/data", "target": "/mnt/d"}]},
        {"name": "Rollout", "cluster": "gpu-a", "selector": [["a", "b"], ["a", "c"]],
         "gpus": "eight"},
    ],
    "ssh_keys": ["alice"],
    "run_script": "cd /w && python train.py  \n\ttabbed",
    "launch_list": 12,
}


def _file(spec: dict[str, Any] | None = None) -> bytes:
    document = document_of(name="ppo", team="vision-rl", spec=spec if spec is not None else SPEC)
    return dump_job_file(document, comment=["a comment"]).encode()


def _problems(data: bytes) -> list[dict[str, Any]]:
    with pytest.raises(JobFileError) as caught:
        parse_job_file(data, job_file_schema())
    return [p.as_dict() for p in caught.value.problems]


def _one(data: bytes) -> dict[str, Any]:
    problems = _problems(data)
    assert len(problems) == 1, problems
    return problems[0]


HEAD = b"apiVersion: rlark.io/v1\nkind: Job\nmetadata:\n  name: ppo\nspec:\n"


def test_an_exported_file_parses_back_to_the_same_spec() -> None:
    parsed = parse_job_file(_file(), job_file_schema())
    assert (parsed.name, parsed.team, parsed.spec) == ("ppo", "vision-rl", SPEC)


def test_the_schema_has_the_editor_parts_and_every_draft_field() -> None:
    schema = job_file_schema()
    assert schema["$schema"].endswith("2020-12/schema") and schema["$id"] == SCHEMA_ID
    spec = schema["properties"]["spec"]
    assert list(spec["properties"]) == [n for n in JobDraftSerializer().fields
                                        if n not in ("name", "team")] == spec_field_names()
    assert spec["additionalProperties"] is False
    assert spec["properties"]["task_type"]["enum"] == ["rl", "data_collection", "evaluation",
                                                       "custom"]
    role = spec["properties"]["roles"]["items"]
    assert role["properties"]["mounts"]["items"]["properties"]["kind"]["enum"] == [
        "host_path", "object_storage"]
    assert all("description" in f for f in role["properties"].values())
    assert all("description" in f for f in spec["properties"].values())


@pytest.mark.parametrize("spec", [
    SPEC, {}, {"roles": None}, {"roles": []}, {"header_role": None, "network_domain": None},
    {"roles": [{"devices": [["rlinf.io/x", "2"]], "cpu": None, "gpus": 1.5}]},
])
def test_what_the_schema_accepts_the_draft_serializer_accepts(spec: dict[str, Any]) -> None:
    check_document(document_of(name="ppo", team="t", spec=spec), job_file_schema())
    serializer = JobDraftSerializer(data=spec)
    assert serializer.is_valid(), serializer.errors


def test_an_unknown_key_names_its_path_place_and_the_nearest_key() -> None:
    problem = _one(HEAD + b"  roles:\n  - name: Actor\n  - name: Rollout\n    gpu: 4\n")
    assert problem == {"code": "schema.unknown_key", "path": "spec.roles[1].gpu", "line": 9,
                       "column": 5, "suggestion": "gpus",
                       "message": "unknown key gpu; did you mean gpus?"}


def test_every_schema_problem_is_listed_with_its_path() -> None:
    problems = _problems(HEAD + b"  task_type: rll\n  run_scrip: x\n  roles:\n"
                         b"  - selector: {a: 1}\n    mounts: [{kind: hostpath, target: /x}]\n")
    assert [(p["code"], p["path"], p["suggestion"]) for p in problems] == [
        ("schema.enum", "spec.task_type", "rl"),
        ("schema.unknown_key", "spec.run_scrip", "run_script"),
        ("schema.type", "spec.roles[0].selector.a", None),
        ("schema.enum", "spec.roles[0].mounts[0].kind", "host_path"),
    ]


def test_a_wrong_type_names_its_path_and_both_types() -> None:
    problem = _one(HEAD + b"  roles:\n  - gpus: [1]\n")
    assert problem["code"] == "schema.type" and problem["path"] == "spec.roles[0].gpus"
    assert problem["message"] == "expected a number or a string or null, got a list"
    assert (problem["line"], problem["column"]) == (7, 11)


@pytest.mark.parametrize(("data", "code", "line", "column"), [
    (b"apiVersion: rlark.io/v1\nkind: [\n", "yaml.syntax", 3, 1),
    (b"a: 1\nb:\n\tc: 2\n", "yaml.tab", 3, 1),
    (b"a: 1\nb: x\na: 2\n", "yaml.duplicate_key", 3, 1),
    (b"a: &x [1]\nb: *x\n", "yaml.alias", 1, 4),
    (b"a: !!binary aGk=\n", "yaml.tag", 1, 4),
    (b"a: 1\n---\nb: 2\n", "yaml.multiple_documents", 2, 1),
    (b"- a\n- b\n", "schema.not_mapping", 1, 1),
    (b"'x'\n", "schema.not_mapping", 1, 1),
    (b"a: 1\nb: x\x00y\n", "file.nul", 2, 5),
    (b"a: 1\nb: \xc3\x28\n", "file.encoding", 2, 4),
    (b"a: 1\nb: \x07\n", "file.binary", 2, 4),
    (b"1: a\n", "yaml.key_type", 1, 1),
    (b"a: " + b"9" * 30 + b"\n", "yaml.number", 1, 4),
    (b"a: .inf\n", "yaml.number", 1, 4),
    (b"a: " + b"[" * 40 + b"]" * 40 + b"\n", "yaml.too_deep", 1, 35),  # the 33rd level
])
def test_each_kind_of_bad_file_has_its_code_and_place(data: bytes, code: str, line: int,
                                                      column: int) -> None:
    problem = _one(data)
    assert (problem["code"], problem["line"], problem["column"]) == (code, line, column), problem


def test_an_alias_bomb_is_refused_before_anything_expands() -> None:
    lines = [b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [b"a%d: &a%d [" % (i, i) + b", ".join([b"*a%d" % (i - 1)] * 10) + b"]"
              for i in range(1, 10)]
    assert _one(b"\n".join(lines) + b"\n")["code"] == "yaml.alias"


@pytest.mark.parametrize(("data", "code"), [
    (b"", "file.empty"), (b"# only a comment\n\n", "file.empty"),
    (b"x" * (MAX_FILE_BYTES + 1), "file.too_large"),
    (b"\xff\xfea\x00:\x00", "file.nul"),
    (HEAD.replace(b"rlark.io/v1", b"rlark.io/v2"), "schema.value"),
    (b"kind: Job\nmetadata: {name: x}\n", "schema.missing_key"),
    (HEAD.replace(b"name: ppo", b'name: "a\\x01b"'), "schema.value"),
    (HEAD.replace(b"name: ppo", b"name: a/b"), "schema.value"),
])
def test_files_that_are_not_job_files(data: bytes, code: str) -> None:
    assert _problems(data)[0]["code"] == code


def test_a_file_at_the_limit_is_read() -> None:
    data = _file()
    padded = data + b"#" * (MAX_FILE_BYTES - len(data) - 1) + b"\n"
    assert len(padded) == MAX_FILE_BYTES
    assert parse_job_file(padded, job_file_schema()).spec == SPEC


def test_dates_and_merge_keys_are_plain_text() -> None:
    parsed = parse_job_file(HEAD + b"  run_script: 2024-01-01\n", job_file_schema())
    assert parsed.spec["run_script"] == "2024-01-01"
    assert _one(HEAD + b"  <<: {a: 1}\n")["code"] == "schema.unknown_key"


def test_tricky_text_survives_export_and_import() -> None:
    spec = {"run_script": "'16'\n  trailing  \r\nyes", "roles": [{"name": "on", "gpus": "08",
                                                                     "image": "null"}]}
    assert parse_job_file(_file(spec), job_file_schema()).spec == spec


# --- overrides ---------------------------------------------------------------------------------

SCHEMA_SPEC = job_file_schema()["properties"]["spec"]


@pytest.mark.parametrize(("text", "path", "value"), [
    ("roles.Rollout.gpus=4", "spec.roles[1].gpus", 4),
    ("roles.rollout.gpus=0.5", "spec.roles[1].gpus", 0.5),
    ("roles.Actor.env.LR=3e-4", "spec.roles[0].env.LR", "3e-4"),
    ("roles.Actor.env.NEW=007", "spec.roles[0].env.NEW", "007"),
    ("roles[0].selector.rlinf.io/pool=a100-b", "spec.roles[0].selector.rlinf.io/pool", "a100-b"),
    ("roles.Actor.cpu.request=8", "spec.roles[0].cpu.request", 8),
    ("roles.Actor.devices.rlinf.io/rdma=2", "spec.roles[0].devices.rlinf.io/rdma", 2),
    ("spec.run_script=cd /x && run", "spec.run_script", "cd /x && run"),
    ("image_compatibility_confirmed=true", "spec.image_compatibility_confirmed", True),
    ("launch_list=null", "spec.launch_list", None),
    ("ssh_keys=[alice, bob]", "spec.ssh_keys", ["alice", "bob"]),
    ("roles.Actor.selector={a: b}", "spec.roles[0].selector", {"a": "b"}),
])
def test_an_override_sets_the_typed_value_at_its_path(text: str, path: str, value: Any) -> None:
    spec, values = overridden(SPEC, [parse_override(text)], SCHEMA_SPEC)
    assert values == {path: value}
    assert spec != SPEC and SPEC["roles"][1]["gpus"] == "eight"  # the source is not changed


def test_env_and_selector_overrides_change_the_right_entry() -> None:
    spec, _values = overridden(SPEC, [parse_override("roles.Actor.env.LR=1"),
                                      parse_override("roles.Rollout.selector.a=z")], SCHEMA_SPEC)
    assert spec["roles"][0]["env"] == [{"name": "LR", "value": "1"}]
    assert spec["roles"][1]["selector"] == [["a", "b"], ["a", "z"]]


@pytest.mark.parametrize(("text", "code", "suggestion"), [
    ("roles.Rollout.gpu=4", "override.path", "gpus"),
    ("roles.Rolout.gpus=4", "override.path", "Rollout"),
    ("run_scrpt=x", "override.path", "run_script"),
    ("roles[5].gpus=1", "override.path", None),
    ("roles.Actor.cpu.requests=1", "override.path", "request"),
    ("run_script.x=1", "override.path", None),
    ("launch_list=twelve", "override.value", None),
    ("image_compatibility_confirmed=maybe", "override.value", None),
    ("ssh_keys=[a, *b]", "override.value", None),
    ("roles.Actor.gpus", "override.syntax", None),
])
def test_a_bad_override_names_its_path_and_the_nearest_key(text: str, code: str,
                                                           suggestion: str | None) -> None:
    with pytest.raises(JobFileError) as caught:
        overridden(SPEC, [parse_override(text, source="set[0]")], SCHEMA_SPEC)
    problem = caught.value.problems[0]
    assert (problem.code, problem.suggestion) == (code, suggestion), problem
    assert caught.value.source == "set[0]"


def test_grid_values_split_at_commas_outside_brackets_and_quotes() -> None:
    assert split_values("4,8") == ["4", "8"]
    assert split_values("[a, b],{x: 1, y: 2},'p,q'") == ["[a, b]", "{x: 1, y: 2}", "'p,q'"]


def test_an_override_result_is_checked_as_a_file() -> None:
    spec = dict(SPEC)
    apply_override(spec, Override(path="task_type", value="rll"), SCHEMA_SPEC)
    with pytest.raises(JobFileError) as caught:
        check_document(document_of(name="x", team="t", spec=spec), job_file_schema())
    assert caught.value.problems[0].suggestion == "rl"
    assert yaml.safe_load(dump_job_file(document_of(name="x", team="t", spec=spec),
                                        comment=[]))["spec"]["task_type"] == "rll"
