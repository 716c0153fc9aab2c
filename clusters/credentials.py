"""Cluster credentials at rest: Fernet encryption with rotating keys.

Keys come from `settings.RLARK_CREDENTIAL_KEYS`, newest first. Encryption always uses
the newest key; decryption tries every key, so a new key can be put in front while old
ciphertexts stay readable until `manage.py rotate_credentials` re-encrypts them.
Plain credentials exist only in memory, on their way to the Kubernetes gateway.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from clusters.k8s import Credentials
from clusters.models import Cluster

__all__ = ["CredentialError", "credentials_for", "decrypt", "encrypt", "is_current", "reencrypt"]


class CredentialError(Exception):
    """A stored credential cannot be decrypted with any configured key."""


def _fernets() -> list[Fernet]:
    """The configured keys, newest first."""
    keys = list(getattr(settings, "RLARK_CREDENTIAL_KEYS", []) or [])
    if not keys:
        raise ImproperlyConfigured("RLARK_CREDENTIAL_KEYS is empty: no key to encrypt with.")
    try:
        return [Fernet(key) for key in keys]
    except ValueError as exc:
        raise ImproperlyConfigured(
            "RLARK_CREDENTIAL_KEYS holds a value that is not a Fernet key "
            "(32 url-safe base64-encoded bytes)."
        ) from exc


def _keys() -> MultiFernet:
    return MultiFernet(_fernets())


def encrypt(text: str) -> str:
    """Encrypt `text` with the newest key; the empty string stays empty (no credential)."""
    if not text:
        return ""
    return _keys().encrypt(text.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    """Decrypt a stored ciphertext with whichever configured key made it."""
    if not token:
        return ""
    try:
        return _keys().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as exc:
        raise CredentialError(
            "A stored credential cannot be decrypted with the configured RLARK_CREDENTIAL_KEYS."
        ) from exc


def reencrypt(token: str) -> str:
    """The same secret encrypted with the newest key (the empty string stays empty)."""
    if not token:
        return ""
    try:
        return _keys().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError) as exc:
        raise CredentialError(
            "A stored credential cannot be decrypted with the configured RLARK_CREDENTIAL_KEYS."
        ) from exc


def is_current(token: str) -> bool:
    """Whether a ciphertext is already encrypted with the newest key."""
    if not token:
        return True
    try:
        _fernets()[0].decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeError):
        return False
    return True


def credentials_for(cluster: Cluster) -> Credentials:
    """What the gateway needs to reach `cluster`, decrypted for this one call."""
    return Credentials(
        api_url=cluster.api_url,
        token=decrypt(cluster.token_encrypted) or None,
        ca_cert=decrypt(cluster.ca_cert_encrypted) or None,
        verify_tls=cluster.verify_tls,
        client_cert=decrypt(cluster.client_cert_encrypted) or None,
        client_key=decrypt(cluster.client_key_encrypted) or None,
    )
