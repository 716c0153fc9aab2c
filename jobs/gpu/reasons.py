"""Why a run's GPU reading is unknown (SPEC 16 `gpu.reason`): a stable code with its parameters,
stored as such (`RunGpu.reason_code`, `reason_params`) and put into words only when shown, in
the viewer's language (the page's, or the API request's), as the Pending sentence and the cause
label are. The API answers both: `reason_code` (stable, for scripts) and `reason` (the words).

A reason of Prometheus's own (its error, `detail`) stays verbatim inside the sentence, like a
cluster's message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _

from jobs.core.gpu import NO_SERIES, TOO_YOUNG

__all__ = ["NOT_CONFIGURED", "NO_PODS", "NO_READING", "NO_SERIES", "PROMETHEUS", "REASONS",
           "TOO_YOUNG", "english", "reason_text"]

NOT_CONFIGURED = "not_configured"  # RLARK_PROMETHEUS_URL is not set
NO_READING = "no_reading"  # configured, but no status pass read this run yet
NO_PODS = "no_running_pods"  # the run has no running pod seen by the status pass yet
PROMETHEUS = "prometheus_error"  # Prometheus gave no usable answer; {detail}: its reason
REASONS = (NOT_CONFIGURED, NO_READING, NO_PODS, NO_SERIES, TOO_YOUNG, PROMETHEUS)


def reason_text(code: str, params: Mapping[str, Any] | None = None, *,
                fallback: str = "") -> str:
    """The reason in the active language; `fallback` (a reading stored before reasons had
    codes, kept in English) for an unknown code, "" for none."""
    params = params or {}
    if code == NOT_CONFIGURED:
        return _("Prometheus is not configured (RLARK_PROMETHEUS_URL)")
    if code == NO_READING:
        return _("no reading yet")
    if code == NO_PODS:
        return _("no running pods seen yet")
    if code == NO_SERIES:
        return _("no DCGM series for the run's pods in Prometheus")
    if code == TOO_YOUNG:
        return _("Running for less than the window (%(seconds)s s)") % {
            "seconds": params.get("window_seconds", "?")}
    if code == PROMETHEUS:
        return _("Prometheus: %(detail)s") % {"detail": params.get("detail") or "?"}
    return fallback


def english(code: str, params: Mapping[str, Any] | None = None) -> str:
    """The reason in English (what `RunGpu.reason` keeps, for logs and the admin)."""
    with translation.override("en"):
        return reason_text(code, params)
