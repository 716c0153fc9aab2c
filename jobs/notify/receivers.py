"""Signal receivers of notifications (connected in `JobsConfig.ready`): clusters announce a
verification's transitions without knowing notifications exist."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from clusters.models import Verification
from clusters.signals import verification_changed
from jobs.notify.services import emit_verification

logger = logging.getLogger(__name__)


@receiver(verification_changed, dispatch_uid="notify_verification_changed")
def notify_verification_changed(sender: Any, *, verification: Verification, transition: str,
                                **kwargs: Any) -> None:
    """Record the event in the transition's transaction (sent after its commit, once).

    In a savepoint of its own: a failure to record the notification is logged and leaves the
    verification's change itself intact."""
    try:
        with transaction.atomic():
            emit_verification(verification=verification, transition=transition)
    except Exception:
        logger.exception("Recording the notification of verification %s (%s) failed",
                         verification.pk, transition)
