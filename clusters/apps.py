from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        # Connect signal receivers in every process (web, Celery worker, shell).
        from clusters.metrics import ClustersCollector
        from clusters.verifications import receivers  # noqa: F401
        from rlark_site.foundation.metrics import register

        register(ClustersCollector())
