"""Container image references: ``[registry[:port]/]path[:tag][@sha256:<64 hex>]``.

RLark wants every role pinned to exact image content: a digest reference, or a tag
with the image's actual digest recorded beside it (the manifest then carries
``path:tag@digest``, so the cluster pulls exactly the recorded content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "IMAGE_PLACEHOLDER",
    "ImageReference",
    "is_digest",
    "is_pinned_reference",
    "is_placeholder",
    "parse_image_reference",
    "pinned_image",
]

# The wizard's placeholder text for the image field; it is never a valid value.
IMAGE_PLACEHOLDER = "registry.example.com/team/image@sha256:<digest>"

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN_COMPONENT = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(
    rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9A-Fa-f:]+\])(?::[0-9]{{1,5}})?"
)
_NAME_MAX = 255


@dataclass(frozen=True)
class ImageReference:
    registry: str  # "" when the reference names none (the runtime's default registry)
    path: str
    tag: str  # "" when absent
    digest: str  # "sha256:<64 hex>" or ""

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.path}" if self.registry else self.path


def is_digest(text: object) -> bool:
    """Whether `text` is ``sha256:`` followed by 64 lower-case hex digits."""
    return isinstance(text, str) and _DIGEST.fullmatch(text) is not None


def is_placeholder(text: object) -> bool:
    """Whether `text` is the form's placeholder (ignoring case and surrounding blanks)."""
    return isinstance(text, str) and text.strip().lower() == IMAGE_PLACEHOLDER.lower()


def _looks_like_registry(component: str) -> bool:
    return (
        "." in component
        or ":" in component
        or component == "localhost"
        or (component != component.lower())
    )


def _split_name(name: str) -> tuple[str, str] | None:
    first, slash, rest = name.partition("/")
    if slash and _looks_like_registry(first):
        if _REGISTRY.fullmatch(first) is None:
            return None
        return first, rest
    return "", name


def parse_image_reference(text: str) -> ImageReference | None:
    """The parts of an image reference, or None when `text` is not one."""
    if not isinstance(text, str) or not text or len(text) > _NAME_MAX + 200:
        return None
    remainder, at, digest = text.partition("@")
    if at and not is_digest(digest):
        return None
    last_slash = remainder.rfind("/")
    colon = remainder.rfind(":")
    tag = ""
    if colon > last_slash:
        remainder, tag = remainder[:colon], remainder[colon + 1 :]
        if _TAG.fullmatch(tag) is None:
            return None
    if not remainder or len(remainder) > _NAME_MAX:
        return None
    split = _split_name(remainder)
    if split is None:
        return None
    registry, path = split
    if not all(_PATH_COMPONENT.fullmatch(part) for part in path.split("/")):
        return None
    return ImageReference(registry=registry, path=path, tag=tag, digest=digest)


def is_pinned_reference(text: object) -> bool:
    """Whether `text` names exact image content on its own: ``repo@sha256:<64 hex>`` or an
    immutable tag with its digest, ``repo:tag@sha256:<64 hex>`` (what a launch list records)."""
    reference = parse_image_reference(text) if isinstance(text, str) else None
    return reference is not None and bool(reference.digest)


def pinned_image(image: str, image_digest: str) -> str:
    """The reference the manifest carries: a digest reference as given, a tag plus its
    recorded digest as ``name:tag@digest``; anything else unchanged."""
    reference = parse_image_reference(image)
    if reference is None or reference.digest or not reference.tag or not is_digest(image_digest):
        return image
    return f"{reference.name}:{reference.tag}@{image_digest}"
