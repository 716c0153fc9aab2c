from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "rlark_site.audit"
    label = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from rlark_site.audit import celery_context  # noqa: F401  (connects task signals)
