"""The prepare and run scripts, environment variables, and the directories scripts cd into."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Sequence

from jobs.core.findings.base import (
    CheckedRole,
    normal_path,
    optional_text,
    shown,
    text_problem,
    text_reason,
)
from jobs.core.spec import (
    as_items,
    field_of,
)
from jobs.core.startscript import (
    MAX_START_SCRIPT_BYTES,
    RAY_TEMP_DIR_ENV,
    RESERVED_ENV_NAMES,
    TUNABLE_ENV_NAMES,
)
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.findings import translate as _

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECONDS = re.compile(r"[0-9]{1,6}")
_CD_WORD = re.compile(r"(?<![\w./-])(?:cd|pushd)(?![\w./-])")
_CD_LINE_MAX = 4096
_COMMAND_STARTS = frozenset(
    {
        ";",
        "&&",
        "||",
        "|",
        "&",
        "(",
        ")",
        "{",
        "!",
        "if",
        "then",
        "else",
        "elif",
        "do",
        "while",
        "until",
        "time",
    }
)


def script_findings(value: object, make: Callable[..., Finding], path: str) -> Iterator[Finding]:
    problem = text_problem(optional_text(value))
    if problem is not None:
        yield make(
            "script.invalid",
            _("The script cannot be used: %(reason)s.") % {"reason": text_reason(problem)},
            path,
            reason=problem,
        )


def env_findings(r: CheckedRole) -> Iterator[Finding]:
    seen: set[str] = set()
    for j, item in enumerate(as_items(field_of(r.role, "env", ()))):
        name, value = field_of(item, "name", None), optional_text(field_of(item, "value", None))
        path = f"env[{j}]"
        if not isinstance(name, str) or not _C_IDENTIFIER.fullmatch(name) or len(name) > 255:
            yield r.finding(
                "env.name.invalid",
                _(
                    "%(name)s is not a variable name (letters, digits and '_', not starting with a "
                    "digit)."
                )
                % {"name": repr(shown(name))},
                f"{path}.name",
                value=shown(name),
            )
        elif name in RESERVED_ENV_NAMES:
            yield r.finding(
                "env.name.reserved",
                _("%(name)s is set by RLark's start script; choose another name.") % {"name": name},
                f"{path}.name",
                name=name,
                reserved=sorted(RESERVED_ENV_NAMES),
            )
        elif name in seen:
            yield r.finding(
                "env.name.duplicate",
                _("%(name)s is set twice in this role.") % {"name": name},
                f"{path}.name",
                name=name,
            )
        if isinstance(name, str):
            seen.add(name)
        yield from env_value_findings(r, name, value, path)


def env_value_findings(r: CheckedRole, name: object, value: object, path: str) -> Iterator[Finding]:
    problem = text_problem(value)
    if problem is None and len(str(value).encode("utf-8")) + 256 >= MAX_START_SCRIPT_BYTES:
        problem = "too_long"
    if problem is None and name in TUNABLE_ENV_NAMES and not _SECONDS.fullmatch(str(value)):
        problem = "not_seconds"
    if problem is not None:
        yield r.finding(
            "env.value.invalid",
            _("The value of %(name)s cannot be used: %(reason)s.")
            % {"name": repr(shown(name)), "reason": text_reason(problem)},
            f"{path}.value",
            reason=problem,
        )
    elif name == RAY_TEMP_DIR_ENV and normal_path(value) is None:
        yield r.finding(
            "env.ray_temp_dir",
            _(
                "RAY_TEMP_DIR must be an absolute path without '..'; it is passed to "
                "ray start --temp-dir."
            ),
            f"{path}.value",
            value=shown(value),
        )


def cd_targets(script: object) -> list[str]:
    """Absolute directories the script changes into with ``cd`` or ``pushd`` (best effort)."""
    if text_problem(script) is not None:
        return []
    assert isinstance(script, str)
    targets: list[str] = []
    for line in script.split("\n"):
        if len(line) > _CD_LINE_MAX or not _CD_WORD.search(line):
            continue
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            continue
        for i, token in enumerate(tokens):
            if token in ("cd", "pushd") and (i == 0 or tokens[i - 1] in _COMMAND_STARTS):
                path = cd_argument(tokens[i + 1 : i + 4])
                if path is not None:
                    targets.append(path)
    return targets


def cd_argument(tokens: Sequence[str]) -> str | None:
    """The literal absolute directory after ``cd`` (options skipped), normalised, or None."""
    arguments = [token for token in tokens if not token.startswith("-")]
    if not arguments or "$" in arguments[0] or "`" in arguments[0]:
        return None
    return normal_path(arguments[0])


def role_scripts_cd(r: CheckedRole) -> list[str]:
    targets = cd_targets(field_of(r.role, "prepare_script"))
    if r.is_header:
        targets += cd_targets(field_of(r.spec, "run_script"))
    return targets
