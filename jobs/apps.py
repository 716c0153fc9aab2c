from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from jobs.metrics import JobsCollector
        from jobs.notify import receivers  # noqa: F401  (connects the signal receivers)
        from rlark_site.foundation.metrics import register

        register(JobsCollector())
