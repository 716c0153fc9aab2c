"""The one error shape in the OpenAPI schema: an `Error` component, and the error answers each
route can give, documented with it (a drf-spectacular postprocessing hook)."""

from __future__ import annotations

from typing import Any

ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The one error shape of every API answer that is not a success.",
    "properties": {
        "detail": {"type": "string", "description": "The problem, readable on its own."},
        "field": {"type": "string", "description": "The first field at fault (a dotted path)."},
        "errors": {
            "type": "object",
            "description": "Every field's messages, by place.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
        "findings": {"type": "array", "items": {"type": "object"},
                     "description": "The findings engine's output."},
    },
    "required": ["detail"],
    "additionalProperties": True,
}
CONTROL_CHARACTERS = "[\\u0000-\\u001f\\u007f-\\u009f]"
WRITE_METHODS = frozenset({"post", "put", "patch"})
DESCRIPTIONS = {
    "400": "Malformed request (body, query or path)",
    "401": "Not authenticated",
    "403": "Not allowed",
    "404": "Not found (or another team's)",
    "413": "Request body too large",
    "415": "Unsupported media type",
    "429": "Too many requests",
}


def add_error_responses(result: dict[str, Any], **_kwargs: Any) -> dict[str, Any]:
    """Add the `Error` component and document every route's error answers with it."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    _fix_inverse_patterns(schemas)
    schemas["Error"] = ERROR_SCHEMA
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                _document_errors(operation, method=method, has_path_params="{" in path)
    return result


def _document_errors(operation: dict[str, Any], *, method: str, has_path_params: bool) -> None:
    responses: dict[str, Any] = operation["responses"]
    codes = ["400", "429"]
    if method in WRITE_METHODS:
        codes += ["413", "415"]
    if {} not in operation.get("security", [{}]):
        codes += ["401", "403", "404"]  # team-scoped: another team's or a missing team is 404
    elif has_path_params:
        codes.append("404")
    for code in codes:
        responses.setdefault(code, {"description": DESCRIPTIONS[code]})
    for code, response in responses.items():
        if code[0] in "45" and "content" not in response:
            response["content"] = {"application/json": {"schema": ERROR_REF}}


def _fix_inverse_patterns(node: Any) -> None:
    """drf-spectacular renders a RegexValidator with `inverse_match` (the control-character
    refusal on names) as the positive pattern; the contract is the negation."""
    if isinstance(node, dict):
        if node.get("pattern") == CONTROL_CHARACTERS:
            node["pattern"] = f"^[^{CONTROL_CHARACTERS[1:-1]}]*$"
        for value in node.values():
            _fix_inverse_patterns(value)
    elif isinstance(node, list):
        for value in node:
            _fix_inverse_patterns(value)
