from django.apps import AppConfig, apps


class AuditConfig(AppConfig):
    name = "rlark_site.foundation.audit"
    label = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from rlark_site.foundation.audit import celery_context  # noqa: F401  (connects task signals)
        from rlark_site.foundation.audit.indexes import ensure_lookup_indexes

        # Sent once per app with models after every migrate: pghistory's is once per run.
        post_migrate.connect(ensure_lookup_indexes, sender=apps.get_app_config("pghistory"))
