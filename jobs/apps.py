from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from clusters.signals import queue_capacity
        from jobs.metrics import JobsCollector
        from jobs.notify import receivers  # noqa: F401  (connects the signal receivers)
        from jobs.records.queue_capacity import capacity_of_requested_jobs
        from rlark_site.foundation.metrics import register

        register(JobsCollector())
        queue_capacity.connect(capacity_of_requested_jobs,
                               dispatch_uid="jobs_capacity_of_requested_jobs")
