from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        # Connect signal receivers in every process (web, Celery worker, shell).
        from clusters.verifications import receivers  # noqa: F401
