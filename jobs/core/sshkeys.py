"""OpenSSH public keys (one ``authorized_keys`` line: ``<type> <base64 blob> [comment]``).

The SSH key page and the findings engine use the same check: a supported key type,
a base64 blob that decodes, the type embedded in the blob equal to the declared
type, no trailing data, and key material that loads (a point on the curve, an RSA
modulus of at least 1024 bits, as OpenSSH itself requires). DSA keys and
certificates are refused: OpenSSH no longer accepts DSA, and certificates are not
``authorized_keys`` entries. Options before the key type are refused too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

from rlark_site.foundation.findings import translate as _

__all__ = [
    "MAX_KEY_LENGTH",
    "MIN_RSA_BITS",
    "SUPPORTED_KEY_TYPES",
    "PublicKey",
    "SSHKeyError",
    "fingerprint_sha256",
    "normalize_openssh_public_key",
    "parse_openssh_public_key",
    "validate_openssh_public_key",
]

SUPPORTED_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MAX_KEY_LENGTH = 16 * 1024
MIN_RSA_BITS = 1024


class SSHKeyError(ValueError):
    """Why a text is not a usable OpenSSH public key (the message is user-facing)."""


@dataclass(frozen=True)
class PublicKey:
    key_type: str
    blob: bytes
    comment: str

    @property
    def line(self) -> str:
        """The key as one normalised ``authorized_keys`` line."""
        encoded = base64.b64encode(self.blob).decode("ascii")
        return " ".join(part for part in (self.key_type, encoded, self.comment) if part)


def _embedded_type(blob: bytes) -> str:
    if len(blob) < 4:
        raise SSHKeyError(_("The key data is too short."))
    (length,) = struct.unpack(">I", blob[:4])
    if length > len(blob) - 4:
        raise SSHKeyError(_("The key data is truncated."))
    try:
        return blob[4 : 4 + length].decode("ascii")
    except UnicodeDecodeError as exc:
        raise SSHKeyError(_("The key data does not start with a key type.")) from exc


def _check_material(line: str) -> None:
    try:
        key = load_ssh_public_key(line.encode("ascii"))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SSHKeyError(_("The key data is not a valid public key of its type.")) from exc
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise SSHKeyError(_("RSA keys must have at least 1024 bits."))


def _split(text: str) -> list[str]:
    stripped = text.strip()
    if not stripped:
        raise SSHKeyError(_("The key is empty."))
    if len(stripped) > MAX_KEY_LENGTH:
        raise SSHKeyError(_("The key is too long."))
    if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in stripped):
        raise SSHKeyError(_("A public key is a single line without control characters."))
    try:
        stripped.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SSHKeyError(_("The key contains characters that are not valid text.")) from exc
    return stripped.split(None, 2)


def parse_openssh_public_key(text: str) -> PublicKey:
    """The parts of a valid key line; raises `SSHKeyError` (user-facing message) otherwise."""
    if not isinstance(text, str):
        raise SSHKeyError(_("The key must be text."))
    parts = _split(text)
    key_type = parts[0]
    if key_type not in SUPPORTED_KEY_TYPES:
        raise SSHKeyError(
            _("Unsupported key type %(type)s; use one of: %(supported)s.")
            % {"type": repr(key_type[:60]), "supported": ", ".join(SUPPORTED_KEY_TYPES)}
        )
    if len(parts) < 2:
        raise SSHKeyError(_("The key data after the key type is missing."))
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SSHKeyError(_("The key data is not valid base64.")) from exc
    if base64.b64encode(blob).decode("ascii") != parts[1]:
        raise SSHKeyError(_("The key data is not valid base64."))
    embedded = _embedded_type(blob)
    if embedded != key_type:
        raise SSHKeyError(
            _("The key data is a %(embedded)s key, but the line declares %(declared)s.")
            % {"embedded": repr(embedded[:60]), "declared": key_type}
        )
    comment = parts[2].strip() if len(parts) > 2 else ""
    key = PublicKey(key_type=key_type, blob=blob, comment=comment)
    _check_material(f"{key_type} {parts[1]}")
    return key


def validate_openssh_public_key(text: str) -> str | None:
    """None for a valid OpenSSH public key line, otherwise the reason (translated)."""
    try:
        parse_openssh_public_key(text)
    except SSHKeyError as exc:
        return str(exc)
    return None


def fingerprint_sha256(text: str) -> str:
    """``SHA256:<base64, unpadded>`` as ``ssh-keygen -l`` prints it; raises `SSHKeyError`."""
    digest = hashlib.sha256(parse_openssh_public_key(text).blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def normalize_openssh_public_key(text: str) -> str:
    """The key as one canonical line (type, base64 blob, comment); raises `SSHKeyError`."""
    return parse_openssh_public_key(text).line
