"""Overrides of a job file's spec by path (`clone --set`, `sweep --grid`): pure functions.

``PATH=VALUE``: PATH is a dotted path into `spec` (``roles.Rollout.gpus``,
``roles.Actor.env.LR``, ``roles[0].selector.rlinf.io/pool``, ``run_script``); VALUE is typed by
the job-file schema at PATH. The grammar is docs/api.md ("Overrides"). Paths that do not exist
are refused with the nearest key or role name; the result is checked as a whole file by the
caller (`jobs.core.jobfile.check_document`).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.jobfile import JobFileError, Problem, format_path, load_value, nearest
from rlark_site.foundation.findings import translate as _

__all__ = ["Override", "apply_override", "parse_override", "split_values"]

# Role fields whose entries are set one by one: everything after the field is the entry's key.
_KEYED = ("selector", "devices", "env")
_RESOURCES = ("cpu", "memory")
_ROLE_INDEX = re.compile(r"^roles\[(\d+)\](?:\.(.*))?$", re.S)
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_INTEGER = re.compile(r"^[-+]?\d{1,18}$")


@dataclass(frozen=True)
class Override:
    """One ``PATH=VALUE``, as given (`source` names it in problems: ``set[2]``)."""

    path: str
    value: str
    source: str = ""


def _refuse(code: str, message: str, path: str, suggestion: str | None = None) -> JobFileError:
    return JobFileError([Problem(code, message, path=path or None, suggestion=suggestion)])


def parse_override(text: str, *, source: str = "") -> Override:
    """``PATH=VALUE`` split at the first ``=``."""
    path, equals, value = str(text).partition("=")
    path = path.strip()
    if not equals or not path:
        raise JobFileError([Problem("override.syntax", _(
            "An override is PATH=VALUE, e.g. roles.Rollout.gpus=4 (got %(text)s).")
            % {"text": str(text)[:100]})], source=source or None)
    return Override(path=path.removeprefix("spec."), value=value, source=source)


def split_values(text: str) -> list[str]:
    """``4,8`` -> ``["4", "8"]``: commas inside brackets, braces or quotes do not split."""
    values, depth, quote, current = [], 0, "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            values.append(current)
            current = ""
            continue
        current += char
    values.append(current)
    return values


# --- typing values by the schema --------------------------------------------------------------


def _types(schema: Mapping[str, Any]) -> set[str]:
    kinds: set[str] = set()
    kind = schema.get("type")
    kinds.update([kind] if isinstance(kind, str) else list(kind or []))
    for key in ("oneOf", "anyOf"):
        for branch in schema.get(key) or ():
            kinds |= _types(branch)
    if "enum" in schema:
        kinds.add("string")
    return kinds


def _number(text: str) -> int | float | None:
    stripped = text.strip()
    if _INTEGER.match(stripped):
        return int(stripped)
    if _NUMBER.match(stripped):
        value = float(stripped)
        return value if math.isfinite(value) else None
    return None


def typed_value(text: str, schema: Mapping[str, Any], *, path: str) -> Any:
    """VALUE as the schema at PATH takes it (docs/api.md, "Overrides")."""
    kinds = _types(schema)
    if kinds & {"object", "array"}:
        try:
            return load_value(text)
        except JobFileError as exc:
            problem = exc.problems[0]
            raise _refuse("override.value", _("Not a YAML value: %(problem)s")
                          % {"problem": problem.message}, path) from None
    if kinds == {"boolean"}:
        if text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        raise _refuse("override.value", _("Expected true or false."), path)
    if "integer" in kinds:
        if "null" in kinds and text.strip().lower() in ("null", ""):
            return None
        if _INTEGER.match(text.strip()):
            return int(text.strip())
        raise _refuse("override.value", _("Expected a whole number%(or_null)s.")
                      % {"or_null": _(" or null") if "null" in kinds else ""}, path)
    if "number" in kinds:
        number = _number(text)
        return text if number is None else number
    return text


# --- walking the path -------------------------------------------------------------------------


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    for candidate in (schema, *(schema.get("anyOf") or ()), *(schema.get("oneOf") or ())):
        if isinstance(candidate, Mapping) and "properties" in candidate:
            return dict(candidate["properties"])
    return {}


def _items(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    for candidate in (schema, *(schema.get("anyOf") or ()), *(schema.get("oneOf") or ())):
        if isinstance(candidate, Mapping) and "items" in candidate:
            return candidate["items"]  # type: ignore[no-any-return]
    return {}


def _unknown(word: str, choices: Sequence[str], path: str, what: str) -> JobFileError:
    suggestion = nearest(word, choices)
    message = _("no %(what)s %(word)s") % {"what": what, "word": word}
    if suggestion is not None:
        message += _("; did you mean %(suggestion)s?") % {"suggestion": suggestion}
    elif choices:
        message += _("; there are: %(choices)s") % {"choices": ", ".join(choices)}
    return _refuse("override.path", message, path, suggestion)


def _role_index(roles: list[Any], token: str, path: str) -> int:
    match = re.fullmatch(r"\[(\d+)\]", token)
    if match:
        index = int(match.group(1))
        if index < len(roles):
            return index
        raise _refuse("override.path", _("no role at index %(index)d (there are %(count)d)")
                      % {"index": index, "count": len(roles)}, path)
    names = [str(r.get("name", "")) if isinstance(r, Mapping) else "" for r in roles]
    for wanted in (token, token.lower()):
        for index, name in enumerate(names):
            if name == wanted or (wanted == token.lower() and name.lower() == wanted):
                return index
    raise _unknown(token, [n for n in names if n], path, _("role"))


def _set_entry(role: dict[str, Any], field: str, key: str, text: str,
               schema: Mapping[str, Any], path: str) -> Any:
    current = role.get(field)
    if field == "env":
        value: Any = text
        entries = current if isinstance(current, list) else []
        for entry in entries:
            if isinstance(entry, dict) and entry.get("name") == key:
                entry["value"] = value
                break
        else:
            entries.append({"name": key, "value": value})
        role[field] = entries
        return value
    value = text if field == "selector" else typed_value(
        text, {"oneOf": [{"type": "number"}, {"type": "string"}]}, path=path)
    if isinstance(current, list):  # pairs (a key repeats): set the last one, else append
        for pair in reversed(current):
            if isinstance(pair, list) and len(pair) == 2 and pair[0] == key:
                pair[1] = value
                break
        else:
            current.append([key, value])
    else:
        mapping = dict(current) if isinstance(current, Mapping) else {}
        mapping[key] = value
        role[field] = mapping
    return value


def _role_override(spec: dict[str, Any], rest: str, text: str,
                   role_schema: Mapping[str, Any], raw: str) -> tuple[str, Any]:
    roles = spec.get("roles")
    if not isinstance(roles, list):
        raise _refuse("override.path", _("the file has no roles to override"), raw)
    token, _dot, tail = rest.partition(".")
    if token.startswith("[") is False and "[" in token:
        token, _bracket, more = token.partition("[")
        tail = f"[{more}.{tail}" if tail else f"[{more}"
    index = _role_index(roles, token, raw)
    role = roles[index]
    if not isinstance(role, dict):
        raise _refuse("override.path", _("roles[%(index)d] is not a role") % {"index": index},
                      raw)
    fields = _properties(role_schema)
    field, _dot, key = tail.partition(".")
    base = ("spec", "roles", index)
    if not field:
        raise _refuse("override.path", _("name a field of the role, e.g. %(example)s")
                      % {"example": f"roles.{token}.gpus"}, raw)
    if field not in fields:
        raise _unknown(field, list(fields), raw, _("role field"))
    path = format_path((*base, field))
    if key and field in _KEYED:
        return f"{path}.{key}", _set_entry(role, field, key, text, fields[field], path)
    if key and field in _RESOURCES:
        if key not in ("request", "limit"):
            raise _unknown(key, ["request", "limit"], raw, _("key"))
        value = typed_value(text, {"oneOf": [{"type": "number"}, {"type": "string"}]},
                            path=path)
        current = role.get(field)
        role[field] = {**(current if isinstance(current, Mapping) else {}), key: value}
        return f"{path}.{key}", value
    if key:
        raise _refuse("override.path", _("%(field)s has no keys to set one by one")
                      % {"field": field}, raw)
    value = typed_value(text, fields[field], path=path)
    role[field] = value
    return path, value


def apply_override(spec: dict[str, Any], override: Override,
                   spec_schema: Mapping[str, Any]) -> tuple[str, Any]:
    """Change `spec` in place; the override's canonical path (``spec.roles[1].gpus``) and
    typed value. `JobFileError` (``override.*``) for a path or value the schema does not take."""
    fields = _properties(spec_schema)
    raw = override.path
    try:
        match = _ROLE_INDEX.match(raw)
        if match:
            return _role_override(spec, f"[{match.group(1)}].{match.group(2) or ''}".rstrip("."),
                                  override.value, _items(fields["roles"]), raw)
        top, _dot, rest = raw.partition(".")
        if top not in fields:
            raise _unknown(top, list(fields), raw, _("key"))
        if top == "roles" and rest:
            return _role_override(spec, rest, override.value, _items(fields["roles"]), raw)
        if rest:
            raise _refuse("override.path", _("%(field)s has no keys to set one by one")
                          % {"field": top}, raw)
        value = typed_value(override.value, fields[top], path=raw)
        spec[top] = value
        return format_path(("spec", top)), value
    except JobFileError as exc:
        problem = exc.problems[0]
        raise JobFileError([Problem(problem.code, problem.message, path=raw,
                                    suggestion=problem.suggestion)]) from None


def overridden(spec: Mapping[str, Any], overrides: Sequence[Override],
               spec_schema: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of `spec` with every override applied in order, and ``{canonical path: value}``."""
    result = copy.deepcopy(dict(spec))
    values: dict[str, Any] = {}
    for override in overrides:
        try:
            path, value = apply_override(result, override, spec_schema)
        except JobFileError as exc:
            raise JobFileError(exc.problems, source=override.source or None) from None
        values[path] = value
    return result, values
