"""Why a run's GPU reading is unknown (SPEC 16 `gpu.reason`), in the viewer's language: the
status pass stores a stable code and its parameters, the job page says it in the page's
language, the API answers the code and the words in the request's language.

A loopback server stands in for Prometheus where the answer itself is the point (an empty
vector: no DCGM series; a 503); a real status pass against the demo simulator reads it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from jobs.gpu.reasons import NO_SERIES, PROMETHEUS, REASONS, TOO_YOUNG, english, reason_text
from jobs.models import RunGpu, RunRecord
from jobs.records.status import sync_submitted_jobs
from tests.jobs.test_gpu_idle import _Fake, _send, gpu_settings

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
__all__ = ["gpu_settings"]  # the GPU tests' settings and eager Celery, used here too
EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


def test_every_reason_has_words_in_both_languages() -> None:
    params = {"window_seconds": 900, "detail": "timeout"}
    for code in REASONS:
        words = english(code, params)
        with translation.override("zh-hans"):
            chinese = reason_text(code, params)
        assert words and chinese and chinese != words, code
    assert english(TOO_YOUNG, params) == "Running for less than the window (900 s)"
    with translation.override("zh-hans"):
        assert "900" in reason_text(TOO_YOUNG, params)
        assert "timeout" in reason_text(PROMETHEUS, params)  # Prometheus's own word, verbatim
        # A reading stored before the codes keeps its (English) words.
        assert reason_text("", {}, fallback="no reading yet") == "no reading yet"


def _pages(owner: Any, language: str) -> list[str]:
    """The job page's progress region (the page loads it with htmx, and refreshes it live)."""
    page = Client(HTTP_ACCEPT_LANGUAGE=language)
    page.force_login(owner)
    region = reverse("jobs:run-record-progress", args=[JOB])
    assert f'hx-get="{region}"' in page.get(reverse("jobs:job-detail", args=[JOB])).content.decode()
    return [page.get(region).content.decode()]


@pytest.mark.parametrize(("answer", "code", "english_words", "chinese_words"), [
    (lambda h: _send(h, EMPTY), NO_SERIES, "no DCGM series for the run&#x27;s pods in Prometheus",
     "Prometheus 中没有该运行的 Pod 的 DCGM 序列"),
    (lambda h: _send(h, b"Service Unavailable", 503, "text/plain"), PROMETHEUS,
     "Prometheus: HTTP 503", "Prometheus 未给出可用的回答：HTTP 503"),
])
def test_the_reason_is_shown_in_the_viewers_language(
        running: RunRecord, settings: Any, owner: Any, api_client_for: Any, answer: Any,
        code: str, english_words: str, chinese_words: str) -> None:
    fake = _Fake(answer)
    settings.RLARK_PROMETHEUS_URL = fake.url
    try:
        sync_submitted_jobs()  # seen Running
        sync_submitted_jobs()  # its pods are known: Prometheus is asked
    finally:
        fake.stop()
    kept = RunGpu.objects.get(run_record=running)
    assert (kept.idle, kept.reason_code) == (None, code)

    for page in _pages(owner, "zh-hans"):
        assert 'id="gpu-text"' in page
        assert f"GPU 活动未知：{chinese_words}。" in page
        assert english_words not in page
    for page in _pages(owner, "en"):
        assert f"GPU activity unknown: {english_words}." in page

    api = api_client_for(owner)
    english_body = api.get(f"/api/v1/jobs/{JOB}/").json()["gpu"]
    assert english_body["reason_code"] == code
    assert english_body["reason"] == english_words.replace("&#x27;", "'")
    chinese_body = api.get(f"/api/v1/jobs/{JOB}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()["gpu"]
    assert chinese_body["reason_code"] == code and chinese_body["reason"] == chinese_words
    record_body = api.get(f"/api/v1/run-records/{JOB}/",
                          HTTP_ACCEPT_LANGUAGE="zh-hans").json()["gpu"]
    assert (record_body["reason_code"], record_body["reason"]) == (code, chinese_words)


def test_without_prometheus_the_api_says_so_with_a_code(running: RunRecord, settings: Any,
                                                        owner: Any, api_client_for: Any) -> None:
    settings.RLARK_PROMETHEUS_URL = ""
    sync_submitted_jobs()
    api = api_client_for(owner)
    body = api.get(f"/api/v1/jobs/{JOB}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()["gpu"]
    assert body["reason_code"] == "not_configured"
    assert body["reason"] == "未配置 Prometheus（RLARK_PROMETHEUS_URL）"
