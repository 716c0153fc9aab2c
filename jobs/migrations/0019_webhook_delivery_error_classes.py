"""The delivery log keeps an error class, never an error's text (SPEC 18): tries logged
before this kept urllib3's message, which says which internal ports answer. Each such row gets
the class its text names; "HTTP <status>" rows and empty ones stay as they are."""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

HTTP_STATUS = re.compile(r"HTTP [0-9]{3}")
CLASSES = {"blocked address", "refused", "timeout", "tls", "dns", "connection", "invalid url"}
# First match wins: the words urllib3 and the OS put in each kind of error.
PATTERNS = (
    ("invalid url", ("not an http(s) url", "invalid url", "failed to parse")),
    ("timeout", ("timed out", "timeout")),
    ("tls", ("ssl", "certificate", "tls")),
    ("dns", ("name or service not known", "nodename nor servname", "name resolution",
             "getaddrinfo", "temporary failure in name")),
    ("refused", ("connection refused", "errno 111")),
)


def error_class(text: str) -> str:
    lowered = text.lower()
    for name, needles in PATTERNS:
        if any(needle in lowered for needle in needles):
            return name
    return "connection"


def scrub(apps: Any, schema_editor: Any) -> None:
    delivery = apps.get_model("jobs", "WebhookDelivery")
    rows = delivery.objects.exclude(last_error="").values_list("pk", "last_error")
    for pk, text in rows.iterator():
        if text in CLASSES or HTTP_STATUS.fullmatch(text):
            continue
        delivery.objects.filter(pk=pk).update(last_error=error_class(text))


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0018_run_record_job_file_snapshot"),
    ]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]
