"""`manage.py rotate_credentials`: re-encrypt cluster credentials with the newest key.

Rotation: put a new Fernet key first in RLARK_CREDENTIAL_KEYS (keep the old ones after
it), restart, run this command, then drop the old keys.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from clusters.credentials import CredentialError
from clusters.inventory.services import credentials_rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored cluster credential with the newest RLARK_CREDENTIAL_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rotated = credentials_rotate()
        except CredentialError as error:
            raise CommandError(str(error)) from error
        message = f"re-encrypted the credentials of {rotated} cluster(s)"
        self.stdout.write(self.style.SUCCESS(message))
