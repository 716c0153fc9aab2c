"""Admission of created Jobs against the shipped CRD's structural schema.

Like a real API server, the simulator prunes fields the schema does not know
(unless `x-kubernetes-preserve-unknown-fields` keeps them), drops nulls of
non-nullable fields, applies `default`s, and then validates; a failure is a
422 with one cause per problem. The CRD file is read lazily and re-read when it
changes; while it does not exist a minimal built-in schema stands in.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from clusters.simulator.objects import JOB_VERSION

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CRD_PATH = REPOSITORY_ROOT / "deploy" / "crds" / "rlinf.io_jobs.yaml"

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED = "x-kubernetes-embedded-resource"
_ROOT_KEPT = ("apiVersion", "kind", "metadata")
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_VALUES = ("items", "additionalProperties", "not")
_REQUIRED_MESSAGE = re.compile(r"^'(?P<name>.+)' is a required property$")

FALLBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            _PRESERVE: True,
            "required": ["tasks"],
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        _PRESERVE: True,
                        "required": ["name", "replicas", "template"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "replicas": {"type": "integer", "minimum": 0},
                            "template": {"type": "object", _PRESERVE: True},
                        },
                    },
                },
            },
        },
        "status": {"type": "object", _PRESERVE: True},
    },
}


@dataclass(frozen=True)
class Cause:
    """One validation problem, shaped like a Kubernetes `StatusCause`."""

    reason: str
    message: str
    field: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


@dataclass
class Admission:
    """The outcome of admitting a body: the object to store, or why not."""

    document: dict[str, Any]
    unknown_fields: list[str] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune_mapping(
    value: dict[str, Any], schema: dict[str, Any], path: str, unknown: list[str]
) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    keep_unknown = schema.get(_PRESERVE) is True or additional is True
    kept_anyway = _ROOT_KEPT if (not path or schema.get(_EMBEDDED)) else ()
    result: dict[str, Any] = {}
    for key, item in value.items():
        child_path = _join(path, key)
        child_schema = properties.get(key)
        if child_schema is None and isinstance(additional, dict):
            child_schema = additional
        if key in kept_anyway:
            result[key] = item
        elif child_schema is not None:
            if item is None and not child_schema.get("nullable"):
                continue
            result[key] = _prune(item, child_schema, child_path, unknown)
        elif keep_unknown:
            result[key] = item
        else:
            unknown.append(child_path)
    for key, child_schema in properties.items():
        if key not in result and "default" in child_schema:
            result[key] = copy.deepcopy(child_schema["default"])
    return result


def _prune(value: Any, schema: dict[str, Any], path: str, unknown: list[str]) -> Any:
    """Prune unknown fields and apply defaults, recording the pruned paths in `unknown`."""
    if isinstance(value, dict) and schema.get("type", "object") == "object":
        return _prune_mapping(value, schema, path, unknown)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            _prune(item, schema["items"], f"{path}[{index}]", unknown)
            for index, item in enumerate(value)
        ]
    return value


def _list_identity(item: Any, schema: dict[str, Any]) -> str | None:
    """How `x-kubernetes-list-type` map/set lists tell items apart (None: no identity)."""
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map" and isinstance(item, dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        return json.dumps({key: item.get(key) for key in keys}, sort_keys=True)
    if list_type == "set":
        return json.dumps(item, sort_keys=True)
    return None


def _duplicates(value: Any, schema: dict[str, Any], path: str) -> list[Cause]:
    """Duplicate entries of map- and set-type lists, which the API server rejects."""
    causes: list[Cause] = []
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, additional)
            if isinstance(child, dict):
                causes += _duplicates(item, child, _join(path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        seen: set[str] = set()
        for index, item in enumerate(value):
            item_path = f"{path}[{index}]"
            identity = _list_identity(item, schema)
            if identity is not None and identity in seen:
                causes.append(
                    Cause("FieldValueDuplicate", f"Duplicate value: {identity}", item_path)
                )
            if identity is not None:
                seen.add(identity)
            causes += _duplicates(item, schema["items"], item_path)
    return causes


def _to_json_schema(schema: Any) -> Any:
    """OpenAPI v3 (structural) schema to JSON Schema draft 4: drop x-kubernetes-*, map nullable."""
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            converted[key] = {name: _to_json_schema(child) for name, child in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            converted[key] = [_to_json_schema(child) for child in value]
        elif key in _SCHEMA_VALUES:
            converted[key] = _to_json_schema(value)
        else:
            converted[key] = value
    if schema.get("nullable") is True:
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
        if "enum" in converted:
            converted["enum"] = [*converted["enum"], None]
    return converted


def _field_path(path: Any) -> str:
    text = ""
    for step in path:
        text = f"{text}[{step}]" if isinstance(step, int) else _join(text, str(step))
    return text


def _cause(error: jsonschema.ValidationError) -> Cause:
    where = _field_path(error.absolute_path)
    if error.validator == "required":
        match = _REQUIRED_MESSAGE.match(error.message)
        name = match.group("name") if match else "?"
        return Cause("FieldValueRequired", "Required value", _join(where, name))
    if error.validator == "type":
        message = f"Invalid value: {error.instance!r}: {where or 'body'} in body must be of type "
        return Cause("FieldValueTypeInvalid", message + str(error.validator_value), where)
    if error.validator == "enum":
        supported = ", ".join(repr(v) for v in error.validator_value)
        message = f"Unsupported value: {error.instance!r}: supported values: {supported}"
        return Cause("FieldValueNotSupported", message, where)
    return Cause("FieldValueInvalid", f"Invalid value: {error.message}", where)


@dataclass(frozen=True)
class _LoadedSchema:
    structural: dict[str, Any]
    validator: jsonschema.Draft4Validator
    source: str


def _crd_version_schema(crd: Any, path: Path) -> dict[str, Any]:
    try:
        versions = crd["spec"]["versions"]
        chosen = next((v for v in versions if v.get("name") == JOB_VERSION), versions[0])
        schema = chosen["schema"]["openAPIV3Schema"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{path}: no spec.versions[].schema.openAPIV3Schema") from exc
    if not isinstance(schema, dict):
        raise ValueError(f"{path}: openAPIV3Schema is not a mapping")
    return schema


class JobSchema:
    """Admits Job bodies against the CRD at `crd_path` (thread-safe, lazily loaded)."""

    def __init__(self, crd_path: Path | None = None) -> None:
        self._path = crd_path or DEFAULT_CRD_PATH
        self._lock = threading.Lock()
        self._loaded: _LoadedSchema | None = None
        self._stamp: float | None = None

    def _load(self) -> _LoadedSchema:
        with self._lock:
            try:
                stamp: float | None = self._path.stat().st_mtime
            except FileNotFoundError:
                stamp = None
            if self._loaded is None or stamp != self._stamp:
                if stamp is None:
                    structural, source = FALLBACK_SCHEMA, "built-in minimal schema"
                else:
                    crd = yaml.safe_load(self._path.read_text(encoding="utf-8"))
                    structural, source = _crd_version_schema(crd, self._path), str(self._path)
                validator = jsonschema.Draft4Validator(_to_json_schema(structural))
                self._loaded = _LoadedSchema(structural, validator, source)
                self._stamp = stamp
            return self._loaded

    @property
    def source(self) -> str:
        """Where the schema in use comes from (the CRD path or the built-in fallback)."""
        return self._load().source

    def admit(self, body: dict[str, Any]) -> Admission:
        """Prune, default and validate a Job body (its `status` is ignored, as on create)."""
        loaded = self._load()
        incoming = {key: value for key, value in body.items() if key != "status"}
        unknown: list[str] = []
        document = _prune(incoming, loaded.structural, "", unknown)
        causes = [_cause(error) for error in loaded.validator.iter_errors(document)]
        causes += _duplicates(document, loaded.structural, "")
        causes.sort(key=lambda cause: cause.field)
        return Admission(document=document, unknown_fields=unknown, causes=causes)
