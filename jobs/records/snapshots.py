"""Plain-data copies of the records a run record freezes at submission (JSON-ready)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from clusters.models import Verification
from jobs.core.progress import progress_settings
from jobs.models import DeploymentParameters, LaunchList


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def launch_list_snapshot(launch_list: LaunchList | None) -> dict[str, Any]:
    if launch_list is None:
        return {}
    return {
        "id": launch_list.pk,
        "title": launch_list.title,
        "entry": launch_list.entry,
        "datasets": launch_list.datasets,
        "models_used": launch_list.models_used,
        "hyperparameters": launch_list.hyperparameters,
        "notes": launch_list.notes,
        "expected_signals": list(launch_list.expected_signals or []),
        "image": launch_list.image,
        "role_images": dict(launch_list.role_images or {}),
        "progress": progress_settings(launch_list.progress).as_dict(),
        "created_by": launch_list.created_by.username,
        "updated_at": _when(launch_list.updated_at),
    }


def deployment_parameters_snapshot(parameters: DeploymentParameters | None) -> dict[str, Any]:
    if parameters is None:
        return {}
    return {
        "id": parameters.pk,
        "title": parameters.title,
        "launch_list": parameters.launch_list_id,
        "roles": list(parameters.roles or []),
        "network_domain": parameters.network_domain,
        "storage_notes": parameters.storage_notes,
        "network_notes": parameters.network_notes,
        "verifications": sorted(parameters.verifications.values_list("pk", flat=True)),
        "created_by": parameters.created_by.username,
        "updated_at": _when(parameters.updated_at),
        "confirmation": _confirmation(parameters),
    }


def _confirmation(parameters: DeploymentParameters) -> dict[str, Any]:
    """Who confirmed the parameters, when, and the fingerprint of what they confirmed."""
    decided_by = parameters.confirmation_decided_by
    return {
        "state": parameters.confirmation_state,
        "decided_by": decided_by.username if decided_by is not None else None,
        "decided_at": _when(parameters.confirmation_decided_at),
        "note": parameters.confirmation_note,
        "fingerprint": parameters.confirmed_fingerprint,
    }


def verification_snapshot(verification: Verification) -> dict[str, Any]:
    return {
        "id": verification.pk,
        "cluster": verification.cluster.name,
        "selector": verification.selector,
        "state": verification.state,
        "for_header_role": verification.for_header_role,
        "matches": verification.matches,
        "inventory_generations": verification.inventory_generations,
        "requested_by": verification.requested_by.username,
        "requested_at": _when(verification.created_at),
        "decided_by": verification.decided_by.username if verification.decided_by else None,
        "decided_at": _when(verification.decided_at),
        "decision_note": verification.decision_note,
        "confirmed_gpu": verification.confirmed_gpu,
        "confirmed_devices": verification.confirmed_devices,
        "confirmed_host_paths": verification.confirmed_host_paths,
        "stale_at": _when(verification.stale_at),
        "drift": verification.drift,
    }


def verifications_snapshot(ids: Iterable[int]) -> list[dict[str, Any]]:
    rows = (
        Verification.objects.filter(pk__in=set(ids))
        .select_related("cluster", "requested_by", "decided_by")
        .order_by("pk")
    )
    return [verification_snapshot(row) for row in rows]
