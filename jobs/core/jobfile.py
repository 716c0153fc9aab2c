"""Job files (SPEC 17): bytes -> a checked document, or every problem with its place.

Pure: no database, no settings. The JSON Schema is passed in (`jobs.jobfiles.schema` derives it
from the draft serializer), so the same schema served to editors is the one files are checked
against. The format is docs/jobfiles.md; the problem codes are a contract (docs/api.md).

What a file may not be, refused before the YAML parser sees it: larger than `MAX_FILE_BYTES`,
containing a NUL byte or another control character, not UTF-8. What YAML may not do in a job
file: anchors and aliases (so no alias bomb can expand), explicit tags, duplicate keys, more than
one document, nesting deeper than `MAX_DEPTH`, keys that are not strings, integers beyond 64 bits,
non-finite floats. Timestamps are not a type here (``2024-01-01`` stays text) and ``<<`` is not
a merge key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.utils.translation import gettext_noop
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from yaml.events import AliasEvent, StreamEndEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rlark_site.foundation.findings import translate as _

__all__ = [
    "API_VERSION",
    "KIND",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "JobFile",
    "JobFileError",
    "Positions",
    "Problem",
    "check_document",
    "format_path",
    "load_value",
    "load_yaml",
    "nearest",
    "parse_job_file",
]

API_VERSION = "rlark.io/v1"
KIND = "Job"
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_PROBLEMS = 50
_INT_LIMIT = 2**63 - 1
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_STR_TAG = "tag:yaml.org,2002:str"

PathParts = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file (or an override), where it is, and the nearest fix."""

    code: str
    message: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    suggestion: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "path": self.path,
                "line": self.line, "column": self.column, "suggestion": self.suggestion}

    def one_line(self) -> str:
        """``line L, column C: PATH: message``, leaving out the parts without a value."""
        parts = []
        if self.line is not None:
            parts.append(_("line %(line)d, column %(column)d")
                         % {"line": self.line, "column": self.column or 1})
        if self.path:
            parts.append(self.path)
        return ": ".join([*parts, self.message])


class JobFileError(Exception):
    """The file (or an override of it) cannot be read as a job file; nothing was looked up."""

    def __init__(self, problems: Iterable[Problem], *, source: str | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source  # the input at fault when it is not the file (``set[2]``)
        super().__init__(self.problems[0].one_line() if self.problems else "bad job file")

    @property
    def too_large(self) -> bool:
        return any(p.code == "file.too_large" for p in self.problems)


@dataclass
class Positions:
    """Where each key and each value of a loaded document starts (1-based line, column)."""

    keys: dict[PathParts, tuple[int, int]] = field(default_factory=dict)
    values: dict[PathParts, tuple[int, int]] = field(default_factory=dict)

    def of_key(self, path: PathParts) -> tuple[int | None, int | None]:
        return self.keys.get(path) or self.of_value(path)

    def of_value(self, path: PathParts) -> tuple[int | None, int | None]:
        found = self.values.get(path) or self.keys.get(path)
        return found if found is not None else (None, None)


@dataclass(frozen=True)
class JobFile:
    """A checked job file: its name, its team (None: the caller's default) and its spec."""

    name: str
    team: str | None
    spec: dict[str, Any]
    positions: Positions = field(default_factory=Positions, compare=False)


def format_path(parts: Sequence[str | int]) -> str:
    """``("spec", "roles", 1, "gpus")`` -> ``spec.roles[1].gpus``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest of `choices` to `word` (difflib), ignoring case first; None if none is near."""
    options = [str(c) for c in choices]
    for option in options:
        if option.lower() == word.lower():
            return option
    found = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return found[0] if found else None


# --- bytes ------------------------------------------------------------------------------------


def _place(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1


def _decode(data: bytes) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise JobFileError([Problem(
            "file.too_large",
            _("The file is %(size)d bytes; a job file is at most %(limit)d bytes (256 KiB).")
            % {"size": len(data), "limit": MAX_FILE_BYTES})])
    nul = data.find(b"\x00")
    if nul >= 0:
        line, column = _place(data, nul)
        raise JobFileError([Problem(
            "file.nul", _("A NUL byte: a job file is UTF-8 text (is this a binary or UTF-16 "
                          "file?)."), line=line, column=column)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _place(data, exc.start)
        raise JobFileError([Problem(
            "file.encoding", _("Not UTF-8 (byte %(offset)d): a job file is UTF-8 text.")
            % {"offset": exc.start}, line=line, column=column)]) from exc
    text = text.removeprefix("\ufeff")
    control = _CONTROL.search(text)
    if control is not None:
        line = text.count("\n", 0, control.start()) + 1
        column = control.start() - (text.rfind("\n", 0, control.start()) + 1) + 1
        raise JobFileError([Problem(
            "file.binary", _("A control character (U+%(code)04X): a job file is text.")
            % {"code": ord(control.group())}, line=line, column=column)])
    return text


# --- YAML -------------------------------------------------------------------------------------


class _Refused(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _at(mark: Any) -> dict[str, Any]:
    return {"line": mark.line + 1, "column": mark.column + 1}


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases, explicit tags, timestamps or merge keys, and with
    a depth limit (the pure-Python composer recurses once per level)."""

    depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(Problem(
                "yaml.alias", _("Anchors and aliases (&name, *name) are not allowed in a job "
                                "file; write the value out."), **_at(event.start_mark)))
        if getattr(event, "tag", None) not in (None, "!"):
            raise _Refused(Problem(
                "yaml.tag", _("Explicit tags (%(tag)s) are not allowed in a job file.")
                % {"tag": event.tag}, **_at(event.start_mark)))
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Refused(Problem(
                "yaml.too_deep", _("Nested deeper than %(max)d levels.") % {"max": MAX_DEPTH},
                **_at(event.start_mark)))
        try:
            return super().compose_node(parent, index)  # type: ignore[return-value]
        finally:
            self.depth -= 1


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _tab_problem(text: str, mark: Any) -> Problem | None:
    lines = text.split("\n")
    for number in (mark.line, mark.line - 1) if mark is not None else ():
        if 0 <= number < len(lines):
            line = lines[number]
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if "\t" in indent:
                return Problem("yaml.tab", _("A tab in the indentation: YAML indents with "
                                             "spaces."), line=number + 1,
                               column=indent.index("\t") + 1)
    return None


def _syntax_problem(text: str, exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    tab = _tab_problem(text, mark)
    if tab is not None:
        return tab
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"{context}; {problem}" if context else str(problem)
    where = _at(mark) if mark is not None else {}
    return Problem("yaml.syntax", _("Not valid YAML: %(problem)s") % {"problem": message},
                   **where)


def _scalar(loader: _Loader, node: ScalarNode, path: PathParts) -> Any:
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, yaml.YAMLError) as exc:  # e.g. an integer of more than 4,300 digits
        raise _Refused(Problem("yaml.number", _("Not a usable number: %(error)s")
                               % {"error": str(exc)[:120]}, path=format_path(path) or None,
                               **_at(node.start_mark))) from exc
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if (isinstance(value, int) and abs(value) > _INT_LIMIT) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise _Refused(Problem(
            "yaml.number", _("Numbers must be finite and within ±(2^63-1)."),
            path=format_path(path) or None, **_at(node.start_mark)))
    return value


def _build(loader: _Loader, node: Node, path: PathParts, positions: Positions) -> Any:
    positions.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag != _STR_TAG:
                raise _Refused(Problem(
                    "yaml.key_type", _("Keys must be strings (quote it: '%(key)s').")
                    % {"key": getattr(key_node, "value", "")}, path=format_path(path) or None,
                    **_at(key_node.start_mark)))
            key = str(key_node.value)
            here = (*path, key)
            if key in result:
                raise _Refused(Problem(
                    "yaml.duplicate_key", _("The key %(key)s appears twice in this mapping.")
                    % {"key": key}, path=format_path(here), **_at(key_node.start_mark)))
            positions.keys[here] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = _build(loader, value_node, here, positions)
        return result
    if isinstance(node, SequenceNode):
        return [_build(loader, item, (*path, index), positions)
                for index, item in enumerate(node.value)]
    return _scalar(loader, node, path)  # type: ignore[arg-type]


def load_yaml(text: str) -> tuple[Any, Positions] | None:
    """One YAML document with every key's and value's place; None for an empty stream."""
    loader = _Loader(text)
    positions = Positions()
    try:
        loader.get_event()  # StreamStart
        if loader.check_event(StreamEndEvent):
            return None
        node = loader.compose_document()
        if node is None:
            return None
        if not loader.check_event(StreamEndEvent):
            event = loader.get_event()
            raise _Refused(Problem(
                "yaml.multiple_documents", _("More than one YAML document: a job file holds "
                                             "one job."), **_at(event.start_mark)))
        return _build(loader, node, (), positions), positions
    except _Refused as exc:
        raise JobFileError([exc.problem]) from None
    except yaml.YAMLError as exc:
        raise JobFileError([_syntax_problem(text, exc)]) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps well below the limit
        raise JobFileError([Problem("yaml.too_deep", _("Nested too deeply."))]) from None
    finally:
        loader.dispose()


def load_value(text: str) -> Any:
    """A YAML value (an override's list or object) read with the job-file rules."""
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise JobFileError([Problem("file.too_large", _("The value is too large."))])
    loaded = load_yaml(text)
    return None if loaded is None else loaded[0]


# --- schema -----------------------------------------------------------------------------------

_TYPE_WORDS = {"object": gettext_noop("an object"), "array": gettext_noop("a list"),
               "string": gettext_noop("a string"), "integer": gettext_noop("a whole number"),
               "number": gettext_noop("a number"), "boolean": gettext_noop("true or false"),
               "null": "null"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _types(expected: Any) -> str:
    names = expected if isinstance(expected, list) else [expected]
    return _(" or ").join(_(_TYPE_WORDS.get(str(n), str(n))) for n in names)


def _unknown_keys(error: ValidationError, positions: Positions) -> Iterable[Problem]:
    allowed = list((error.schema.get("properties") or {}) if isinstance(error.schema, Mapping)
                   else {})
    path = tuple(error.absolute_path)
    for key in error.instance:
        if key in allowed:
            continue
        here = (*path, key)
        suggestion = nearest(key, allowed)
        if suggestion is not None:
            message = _("unknown key %(key)s; did you mean %(suggestion)s?") % {
                "key": key, "suggestion": suggestion}
        else:
            message = _("unknown key %(key)s; allowed: %(allowed)s") % {
                "key": key, "allowed": ", ".join(allowed)}
        line, column = positions.of_key(here)
        yield Problem("schema.unknown_key", message, path=format_path(here), line=line,
                      column=column, suggestion=suggestion)


def _leaves(error: ValidationError) -> list[ValidationError]:
    if error.validator in ("oneOf", "anyOf") and error.context:
        return [leaf for sub in error.context for leaf in _leaves(sub)]
    return [error]


def _alternatives(error: ValidationError, positions: Positions) -> Iterable[Problem]:
    """A value matching none of `oneOf`/`anyOf`: the problem inside the branch that went
    deepest (the value had that branch's shape), else "expected A or B, got C"."""
    leaves = _leaves(error)
    depth = max(len(leaf.absolute_path) for leaf in leaves)
    deepest = [leaf for leaf in leaves if len(leaf.absolute_path) == depth]
    telling = [leaf for leaf in deepest if leaf.validator != "type"]
    if depth > len(error.absolute_path) or telling:
        yield from _problem((telling or deepest)[0], positions)
        return
    expected: list[str] = []
    for leaf in deepest:
        for name in leaf.validator_value if isinstance(leaf.validator_value, list) else [
                leaf.validator_value]:
            if name not in expected:
                expected.append(str(name))
    path = tuple(error.absolute_path)
    line, column = positions.of_value(path)
    yield Problem("schema.type", _("expected %(expected)s, got %(actual)s") % {
        "expected": _types(expected), "actual": _types(_kind(error.instance))},
        path=format_path(path) or None, line=line, column=column)


def _problem(error: ValidationError, positions: Positions) -> Iterable[Problem]:
    if error.validator in ("oneOf", "anyOf") and error.context:
        yield from _alternatives(error, positions)
        return
    if error.validator == "additionalProperties":
        yield from _unknown_keys(error, positions)
        return
    path = tuple(error.absolute_path)
    line, column = positions.of_value(path)
    where: dict[str, Any] = {"path": format_path(path) or None, "line": line, "column": column}
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        for key in missing:
            yield Problem("schema.missing_key", _("the key %(key)s is required")
                          % {"key": key}, **{**where, "path": format_path((*path, key))})
    elif error.validator == "type":
        yield Problem("schema.type", _("expected %(expected)s, got %(actual)s") % {
            "expected": _types(error.validator_value), "actual": _types(_kind(error.instance))},
            **where)
    elif error.validator == "enum":
        allowed = [str(v) for v in error.validator_value]
        suggestion = nearest(str(error.instance), allowed)
        yield Problem("schema.enum", _("%(value)s is not one of %(allowed)s") % {
            "value": error.instance, "allowed": ", ".join(allowed)}, suggestion=suggestion,
            **where)
    elif error.validator == "const":
        yield Problem("schema.value", _("must be %(value)s") % {"value": error.validator_value},
                      suggestion=str(error.validator_value), **where)
    elif error.validator in ("maxLength", "maxItems", "maxProperties"):
        yield Problem("schema.value", _("too long: at most %(max)d") % {
            "max": error.validator_value}, **where)
    elif error.validator in ("minItems", "minLength"):
        yield Problem("schema.value", _("too short: at least %(min)d") % {
            "min": error.validator_value}, **where)
    else:
        yield Problem("schema.value", error.message[:200], **where)


def check_document(document: Any, schema: Mapping[str, Any],
                   positions: Positions | None = None) -> None:
    """Raise `JobFileError` with every schema problem of `document` (at most `MAX_PROBLEMS`)."""
    where = positions or Positions()
    if not isinstance(document, dict):
        line, column = where.of_value(())
        raise JobFileError([Problem(
            "schema.not_mapping", _("A job file is a mapping with apiVersion, kind, metadata "
                                    "and spec; this is %(kind)s.") % {"kind": _types(
                                        _kind(document))}, line=line, column=column)])
    validator = Draft202012Validator(schema)
    problems: list[Problem] = []
    for error in validator.iter_errors(document):
        problems.extend(_problem(error, where))
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        raise JobFileError(sorted(problems[:MAX_PROBLEMS],
                                  key=lambda p: (p.line or 0, p.column or 0, p.path or "")))


def parse_job_file(data: bytes, schema: Mapping[str, Any]) -> JobFile:
    """The job file in `data`, checked against `schema`; `JobFileError` with its problems."""
    text = _decode(data)
    loaded = load_yaml(text)
    if loaded is None:
        raise JobFileError([Problem("file.empty", _("The file is empty: a job file has "
                                                    "apiVersion, kind, metadata and spec."))])
    document, positions = loaded
    check_document(document, schema, positions)
    metadata = document["metadata"]
    return JobFile(name=metadata["name"], team=metadata.get("team"),
                   spec=dict(document.get("spec") or {}), positions=positions)
