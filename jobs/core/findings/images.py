"""Each role's image reference and digest; roles that mix images; each role's image against
the one its launch list records."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from jobs.core.findings.base import (
    SHOWN_MAX,
    CheckedRole,
    optional_text,
    shown,
)
from jobs.core.images import is_digest, is_placeholder, parse_image_reference, pinned_image
from jobs.core.spec import (
    CheckContext,
    JobSpec,
    LaunchListImages,
    as_text,
    field_of,
    spec_roles,
)
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _


def image_findings(r: CheckedRole) -> Iterator[Finding]:
    image = optional_text(field_of(r.role, "image"))
    digest = optional_text(field_of(r.role, "image_digest"))
    if isinstance(image, str) and not image.strip():
        yield r.finding("image.missing", _("The image is required."), "image")
        return
    if is_placeholder(image):
        yield r.finding(
            "image.placeholder",
            _("The form's placeholder is not an image; enter the real reference."),
            "image",
        )
        return
    reference = parse_image_reference(image)  # type: ignore[arg-type]
    if reference is None:
        yield r.finding(
            "image.invalid",
            _("%(image)s is not an image reference ([registry/]path[:tag][@sha256:<digest>]).")
            % {"image": repr(shown(image))},
            "image",
            value=shown(image),
        )
        return
    if digest != "" and not is_digest(digest):
        yield r.finding(
            "image.invalid",
            _("The recorded digest must be sha256: followed by 64 lower-case hex digits."),
            "image_digest",
            value=shown(digest),
        )
        return
    if reference.digest:
        if digest and digest != reference.digest:
            yield r.finding(
                "image.invalid",
                _("The recorded digest differs from the digest in the image reference."),
                "image_digest",
                reference=reference.digest,
                recorded=digest,
            )
        return
    if not reference.tag or reference.tag == "latest":
        yield r.finding(
            "image.mutable_tag",
            _(
                "Pin the image: use a digest reference (@sha256:...) or a version tag with its "
                "digest recorded; 'latest' and untagged references change under you."
            ),
            "image",
            tag=reference.tag,
        )
    elif not digest:
        yield r.finding(
            "image.digest_missing",
            _("Record the actual digest of tag %(tag)s beside it (or use a digest reference).")
            % {"tag": reference.tag},
            "image_digest",
            tag=reference.tag,
        )


def image_identity(image: str, recorded_digest: str) -> str:
    """What an image reference pins: ``name@digest`` when a digest is known (the tag then
    does not matter), else the reference itself."""
    reference = parse_image_reference(image)
    if reference is None:
        return image
    digest = reference.digest or (recorded_digest if is_digest(recorded_digest) else "")
    return f"{reference.name}@{digest}" if digest else image


def mixed_image_findings(spec: JobSpec, roles: Sequence[object]) -> Iterator[Finding]:
    images: dict[str, str] = {}
    identities: set[str] = set()
    for role in roles:
        image, name = field_of(role, "image"), field_of(role, "name")
        if isinstance(image, str) and parse_image_reference(image) and isinstance(name, str):
            digest = as_text(field_of(role, "image_digest"))
            images.setdefault(name[:SHOWN_MAX], pinned_image(image, digest))
            identities.add(image_identity(image, digest))
    if len(identities) > 1 and field_of(spec, "image_compatibility_confirmed") is not True:
        yield new_finding(
            "image.mixed",
            _(
                "The roles use different images; confirm that their Ray, Python and RLinf "
                "versions are compatible."
            ),
            field="image_compatibility_confirmed",
            images=images,
        )


# An image reference is at most a 255-character name, a tag and a digest: shown whole.
REFERENCE_SHOWN_MAX = 500


def launch_list_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    """The linked launch list records no image to compare the roles' images with (a warning:
    launch lists written before RLark recorded images still work, but step 4 cannot be done)."""
    images = field_of(ctx, "launch_list_images", None)
    if isinstance(images, LaunchListImages) and not images.recorded and spec_roles(spec):
        yield new_finding(
            "launch_list.image.missing",
            _(
                "The launch list records no main container image; record it there (one for "
                "all roles or one per role) so each role's image can be compared with it."
            ),
            field="launch_list",
            severity="warning",
            launch_list=field_of(spec, "launch_list_id", None),
        )


def launch_list_image_findings(r: CheckedRole) -> Iterator[Finding]:
    """The role's image must equal the digest or immutable version the launch list records for
    it (the manual's step 4). Compared by content: repository and digest, so `repo@sha256:D`
    equals `repo:v1@sha256:D` and a tag with `D` recorded beside it."""
    images = field_of(r.ctx, "launch_list_images", None)
    if not isinstance(images, LaunchListImages) or not images.recorded or r.name is None:
        return
    expected = images.for_role(r.name)
    if expected is None:
        yield r.finding(
            "launch_list.image.unlisted",
            _(
                "The launch list records images per role and none for role %(role)s; add this "
                "role (or one image for all roles) to the launch list."
            )
            % {"role": r.label},
            "image",
            listed=[name[:SHOWN_MAX] for name, _reference in images.role_images],
        )
        return
    image, digest = field_of(r.role, "image"), as_text(field_of(r.role, "image_digest"))
    reference = parse_image_reference(image) if isinstance(image, str) else None
    if reference is None or not (reference.digest or is_digest(digest)):
        return  # the image's own findings say what is wrong with it
    if image_identity(image, digest) != image_identity(expected, ""):
        yield r.finding(
            "launch_list.image.mismatch",
            _(
                "The image differs from the one the launch list records for this role "
                "(%(expected)s); the main image must be exactly that digest or immutable version."
            )
            % {"expected": expected[:REFERENCE_SHOWN_MAX]},
            "image",
            expected=expected[:REFERENCE_SHOWN_MAX],
            image=pinned_image(image, digest)[:REFERENCE_SHOWN_MAX],
        )
