"""Access links of a cluster: URL templates (TensorBoard, Ray dashboard) and an exec/SSH
command template that a platform admin sets, rendered for one job's head pod.

Pure: no database. A template is text with placeholders in braces, `{namespace}`, `{job}`,
`{task}`, `{pod}` and `{log_dir}` (a literal brace is written twice, `{{` / `}}`). The
rules, checked when a template is saved (model, form and API share `validate_*`):

- only those placeholders, each bare (no `{pod.x}`, `{pod[0]}`, `{pod!r}`, `{pod:>9}`);
- at most `MAX_TEMPLATE` characters, no control characters;
- a URL template starts with `http://` or `https://` and renders (with sample values) to an
  http(s) URL with a host and no user part;
- a command template puts every placeholder outside quotes and not right after `\\` or `$`,
  and closes every quote it opens.

Values are substituted encoded, never formatted into the text: URL-encoded with nothing
left safe (`/` becomes `%2F`) in URLs, shell-quoted (`shlex.quote`) in commands. So a job,
pod or log directory name, whatever it holds, stays one path segment or one shell word and
can never add a host, a query, a second command or an option. A rendered URL is checked
again and dropped when it is not an http(s) URL any more.
"""

from __future__ import annotations

import shlex
import string
from dataclasses import asdict, dataclass
from urllib.parse import quote, urlsplit

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from clusters.validators import valid_host
from rlark_site.foundation.validators import has_control_characters

__all__ = [
    "MAX_TEMPLATE",
    "PLACEHOLDERS",
    "AccessValues",
    "render_command",
    "render_url",
    "validate_command_template",
    "validate_url_template",
]

PLACEHOLDERS = ("namespace", "job", "task", "pod", "log_dir")
MAX_TEMPLATE = 500
_SAMPLE_HOST_VALUE = "x"


@dataclass(frozen=True)
class AccessValues:
    """What a template's placeholders stand for, for one job's head pod."""

    namespace: str
    job: str
    task: str
    pod: str
    log_dir: str = ""


_SAMPLE = AccessValues(namespace="rl", job="ppo-run", task="head", pod="ppo-run-head-0",
                       log_dir="/mnt/tb")

Part = tuple[str, str | None]  # (literal text, placeholder name or None)


def _parts(template: str) -> list[Part]:
    """The template as (literal, placeholder) pairs; `ValidationError` when malformed."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValidationError(
            _("Unbalanced braces: write a literal brace as {{ or }}."), code="template_braces"
        ) from exc
    parts: list[Part] = []
    for literal, field, spec, conversion in parsed:
        if field is not None and (field not in PLACEHOLDERS or spec or conversion):
            raise ValidationError(
                _("Unknown placeholder {%(name)s}; use %(known)s.")
                % {"name": field + (f"!{conversion}" if conversion else "")
                   + (f":{spec}" if spec else ""),
                   "known": ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)},
                code="template_placeholder",
            )
        parts.append((literal, field))
    return parts


def _check_text(template: str) -> list[Part]:
    if len(template) > MAX_TEMPLATE:
        raise ValidationError(
            _("At most %(max)d characters.") % {"max": MAX_TEMPLATE}, code="template_length")
    if has_control_characters(template):
        raise ValidationError(
            _("Control characters (line breaks, tabs, NUL, ...) are not allowed here."),
            code="control_characters")
    return _parts(template)


def _substitute(parts: list[Part], values: AccessValues, encode: object) -> str:
    given = asdict(values)
    out = []
    for literal, field in parts:
        out.append(literal)
        if field is not None:
            out.append(encode(given[field]))  # type: ignore[operator]
    return "".join(out)


def _url_encode(value: str) -> str:
    return quote(value, safe="")


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return False
    host = parts.hostname or ""
    if parts.netloc.startswith("["):
        host = f"[{host}]"
    return (parts.scheme in ("http", "https") and bool(parts.netloc)
            and "@" not in parts.netloc and valid_host(host))


def validate_url_template(template: str) -> None:
    """An http(s) URL template (see the module's rules); `ValidationError` otherwise."""
    parts = _check_text(template)
    if not template.startswith(("http://", "https://")):
        raise ValidationError(_("Start the URL with http:// or https://."),
                              code="template_scheme")
    if not _is_http_url(_substitute(parts, _SAMPLE, _url_encode)):
        raise ValidationError(
            _("Not an http(s) URL with a host name (and no user@ part) once filled in."),
            code="template_url")


def render_url(template: str, values: AccessValues) -> str | None:
    """The URL with every value URL-encoded; None when the template is invalid or the
    result is not an http(s) URL."""
    try:
        validate_url_template(template)
    except ValidationError:
        return None
    url = _substitute(_parts(template), values, _url_encode)
    return url if _is_http_url(url) else None


def _quote_states(parts: list[Part]) -> list[str]:
    """The shell quoting state just before each placeholder, then at the end: "" outside
    quotes, else what is open: "'" , '"', "$'" (ANSI-C quotes), or a pending "\\" escape
    or bare "$" (each of which would change the meaning of a value's first character)."""
    states: list[str] = []
    state = ""
    for literal, field in parts:
        for char in literal:
            state = _next_state(state, char)
        if field is not None:
            states.append(state)
    states.append(state)
    return states


def _next_state(state: str, char: str) -> str:
    if state in ("", "$"):
        if state == "$" and char in "'\"":
            return "$'" if char == "'" else '"'
        return {"'": "'", '"': '"', "\\": "\\", "$": "$"}.get(char, "")
    if state == "\\":
        return ""  # the escaped character is taken literally
    if state.endswith("\\"):
        return state[:-1]  # an escape inside "..." or $'...'
    if state == "'":
        return "" if char == "'" else state
    if char == "\\":
        return state + "\\"
    closing = "'" if state == "$'" else '"'
    return "" if char == closing else state


def validate_command_template(template: str) -> None:
    """A shell command template (see the module's rules); `ValidationError` otherwise."""
    parts = _check_text(template)
    if not template.strip():
        raise ValidationError(_("Enter a command."), code="template_empty")
    *before_placeholders, at_end = _quote_states(parts)
    if any(before_placeholders):
        raise ValidationError(
            _("Put placeholders outside quotes and not right after \\ or $: RLark quotes "
              "the values itself."), code="template_quoted")
    if at_end not in ("", "$"):
        raise ValidationError(_("A quote or an escape is not closed."), code="template_quote_open")


def render_command(template: str, values: AccessValues) -> str | None:
    """The command with every value shell-quoted (one word each); None when the template
    is invalid."""
    try:
        validate_command_template(template)
    except ValidationError:
        return None
    return _substitute(_parts(template), values, shlex.quote)
