"""The job file's JSON Schema, derived from the draft serializer's fields (one definition).

`spec` is `JobDraftSerializer` without `name` and `team`: every field the API takes, with its
type, limits and help text, and no other (``additionalProperties: false`` on every object). The
schema is stricter than the draft body in two places only, where a file should fail early with
a suggestion: `task_type` and a mount's `kind` are enums (the engine's own constants). Whatever
this schema accepts, the serializer accepts (tests/jobs/test_jobfile_schema.py holds it so).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from rest_framework import serializers

from jobs.core.jobfile import API_VERSION, KIND
from jobs.core.spec import MOUNT_KINDS, TASK_TYPES
from jobs.drafts.serializers import JobDraftSerializer

__all__ = ["SCHEMA_ID", "SPEC_EXCLUDED", "job_file_schema", "spec_field_names"]

SCHEMA_ID = "https://rlark.io/schemas/job-file/v1.json"
SPEC_EXCLUDED = ("name", "team")  # in metadata instead
# A name a draft can be stored and found under (no '/', no control characters, no lone
# surrogates: jobs.drafts.services refuses them); the engine judges the rest (job.name.invalid).
_NAME_PATTERN = "^[^/\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff]+$"
# Where the file is stricter than the draft body: (path of field names, allowed values).
_ENUMS: dict[tuple[str, ...], list[str]] = {
    ("task_type",): list(TASK_TYPES),
    ("roles", "mounts", "kind"): list(MOUNT_KINDS),
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _object(serializer: serializers.Serializer, path: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: _field(f, (*path, name)) for name, f in serializer.fields.items()},
    }


def _base(field: serializers.Field, path: tuple[str, ...]) -> dict[str, Any]:
    custom = getattr(field, "json_schema", None)
    if custom is not None:
        return copy.deepcopy(custom)
    if isinstance(field, serializers.Serializer):
        return _object(field, path)
    if isinstance(field, serializers.ListField):
        schema: dict[str, Any] = {"type": "array", "items": _field(field.child, path)}
        if field.max_length is not None:
            schema["maxItems"] = field.max_length
        return schema
    if isinstance(field, serializers.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, serializers.IntegerField):
        return {"type": "integer"}
    if isinstance(field, serializers.CharField):
        text: dict[str, Any] = {"type": "string"}
        if field.max_length is not None:
            text["maxLength"] = field.max_length
        if not field.allow_blank:
            text["minLength"] = 1
        return text
    raise TypeError(f"no JSON Schema for {type(field).__name__} at {'.'.join(path)}")


def _field(field: serializers.Field, path: tuple[str, ...]) -> dict[str, Any]:
    schema = _base(field, path)
    if path in _ENUMS:
        schema = {"type": "string", "enum": _ENUMS[path]}
    if getattr(field, "allow_null", False):
        schema = _nullable(schema)
    if field.help_text:
        schema["description"] = str(field.help_text)
    return schema


def spec_field_names() -> list[str]:
    """The keys of `spec`, in the serializer's (and the exported file's) order."""
    return [str(n) for n in JobDraftSerializer().fields.keys() if n not in SPEC_EXCLUDED]


@functools.cache
def _schema() -> dict[str, Any]:
    draft = JobDraftSerializer()
    spec = {
        "type": "object",
        "additionalProperties": False,
        "description": "the job draft body of the REST API (POST /api/v1/jobs/) without name "
                       "and team",
        "properties": {name: _field(draft.fields[name], (name,)) for name in spec_field_names()},
    }
    metadata = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "description": "which job: its name and team",
        "properties": {
            "name": {**_base(draft.fields["name"], ("name",)), "minLength": 1,
                     "pattern": _NAME_PATTERN,
                     "description": "the job's name, unique platform-wide; apply creates or "
                                    "updates the draft of this name"},
            "team": {"type": "string", "minLength": 1, "maxLength": 50,
                     "pattern": "^[-a-zA-Z0-9_]+$",
                     "description": "team slug; default: your first team"},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "RLark job file",
        "description": f"One RLark job ({API_VERSION} {KIND}): apply it with `rlark apply -f "
                       "FILE`. Format: docs/jobfiles.md.",
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata"],
        "properties": {
            "apiVersion": {"const": API_VERSION, "description": "the job-file format version"},
            "kind": {"const": KIND, "description": "always Job"},
            "metadata": metadata,
            "spec": spec,
        },
    }


def job_file_schema() -> dict[str, Any]:
    """The JSON Schema of a job file (a fresh copy: callers may change theirs)."""
    return copy.deepcopy(_schema())
