from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        # Connect signal receivers in every process (web, Celery worker, shell).
        from clusters.matching import forget_matches
        from clusters.metrics import ClustersCollector
        from clusters.signals import inventory_changed
        from clusters.verifications import receivers  # noqa: F401
        from rlark_site.foundation.metrics import register

        register(ClustersCollector())
        inventory_changed.connect(forget_matches, dispatch_uid="clusters_forget_matches")
