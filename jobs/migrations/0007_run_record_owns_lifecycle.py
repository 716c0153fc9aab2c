"""The run record becomes the one owner of a run's lifecycle (issue 13).

`Job.state`, `cluster`, `namespace`, `submitted_at`, `pending_*` and `status_*` duplicated
`RunRecord.submission_state`, `cluster`, `namespace` and `submitted_at`. The run's state,
Pending clock and flag and the cluster's last reason move to `RunRecord` (`state` replaces
`submission_state`); a job's state is derived from then on (draft while it has no record).
Rows are carried over both ways; the audit triggers are off while they are.
"""

from typing import Any

import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models

# The old `submission_state` of a record, read as a run state when its job said draft (never
# written so by RLark, but a run record's existence decides) -- and the way back.
_FROM_SUBMISSION = {"queued": "queued", "submitting": "submitting", "submitted": "pending",
                    "failed": "submit_failed"}
_LIFECYCLE = ("pending_since", "pending_flagged", "status_reason", "status_message",
              "status_checked_at")


def _run_state(job: Any, record: Any) -> str:
    if record.cancelled_at is not None:
        return "cancelled"
    if job.state != "draft":
        return str(job.state)
    return _FROM_SUBMISSION.get(record.submission_state, "queued")


def carry_over(apps: Any, schema_editor: Any) -> None:
    RunRecord = apps.get_model("jobs", "RunRecord")
    records = list(RunRecord.objects.select_related("job"))
    for record in records:
        job = record.job
        record.state = _run_state(job, record)
        record.submitted_at = record.submitted_at or job.submitted_at
        for field in _LIFECYCLE:
            setattr(record, field, getattr(job, field))
    RunRecord.objects.bulk_update(records, ["state", "submitted_at", *_LIFECYCLE], batch_size=500)


def _submission_state(record: Any) -> str:
    if record.state in ("queued", "submitting"):
        return str(record.state)
    if record.state == "submit_failed":
        return "failed"
    return "submitted" if record.submitted_at is not None else "queued"


def carry_back(apps: Any, schema_editor: Any) -> None:
    Job, RunRecord = apps.get_model("jobs", "Job"), apps.get_model("jobs", "RunRecord")
    records = list(RunRecord.objects.select_related("job"))
    jobs = []
    for record in records:
        record.submission_state = _submission_state(record)
        job = record.job
        job.state, job.cluster, job.namespace = record.state, record.cluster, record.namespace
        job.submitted_at = record.submitted_at
        for field in _LIFECYCLE:
            setattr(job, field, getattr(record, field))
        jobs.append(job)
    RunRecord.objects.bulk_update(records, ["submission_state"], batch_size=500)
    Job.objects.bulk_update(
        jobs, ["state", "cluster", "namespace", "submitted_at", *_LIFECYCLE], batch_size=500
    )


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0006_audit_no_truncate'),
        ('tenancy', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='job',
            name='insert_insert',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='job',
            name='update_update',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='job',
            name='delete_delete',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='runrecord',
            name='insert_insert',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='runrecord',
            name='update_update',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='runrecord',
            name='delete_delete',
        ),
        migrations.AddField(
            model_name='runrecord',
            name='pending_flagged',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='runrecord',
            name='pending_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='runrecord',
            name='state',
            field=models.CharField(choices=[('draft', 'draft'), ('queued', 'queued'), ('submitting', 'submitting'), ('submit_failed', 'submit failed'), ('pending', 'pending'), ('running', 'running'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('cancelled', 'cancelled')], default='queued', max_length=20),
        ),
        migrations.AddField(
            model_name='runrecord',
            name='status_checked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='runrecord',
            name='status_message',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='runrecord',
            name='status_reason',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AddField(
            model_name='runrecordevent',
            name='pending_flagged',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='runrecordevent',
            name='pending_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='runrecordevent',
            name='state',
            field=models.CharField(choices=[('draft', 'draft'), ('queued', 'queued'), ('submitting', 'submitting'), ('submit_failed', 'submit failed'), ('pending', 'pending'), ('running', 'running'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('cancelled', 'cancelled')], default='queued', max_length=20),
        ),
        migrations.AddField(
            model_name='runrecordevent',
            name='status_message',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='runrecordevent',
            name='status_reason',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AddIndex(
            model_name='runrecord',
            index=models.Index(fields=['cluster', 'state'], name='run_cluster_state'),
        ),
        migrations.RunPython(carry_over, carry_back),
        migrations.RemoveField(
            model_name='job',
            name='cluster',
        ),
        migrations.RemoveField(
            model_name='job',
            name='namespace',
        ),
        migrations.RemoveField(
            model_name='job',
            name='pending_flagged',
        ),
        migrations.RemoveField(
            model_name='job',
            name='pending_since',
        ),
        migrations.RemoveField(
            model_name='job',
            name='state',
        ),
        migrations.RemoveField(
            model_name='job',
            name='status_checked_at',
        ),
        migrations.RemoveField(
            model_name='job',
            name='status_message',
        ),
        migrations.RemoveField(
            model_name='job',
            name='status_reason',
        ),
        migrations.RemoveField(
            model_name='job',
            name='submitted_at',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='cluster',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='namespace',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='pending_flagged',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='pending_since',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='state',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='status_message',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='status_reason',
        ),
        migrations.RemoveField(
            model_name='jobevent',
            name='submitted_at',
        ),
        migrations.RemoveField(
            model_name='runrecord',
            name='submission_state',
        ),
        migrations.RemoveField(
            model_name='runrecordevent',
            name='submission_state',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='job',
            trigger=pgtrigger.compiler.Trigger(name='insert_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "jobs_jobevent" ("created_at", "created_by_id", "deployment_parameters_id", "header_role", "id", "image_compatibility_confirmed", "launch_list_id", "name", "network_domain", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "run_script", "ssh_key_names", "task_type", "team_id", "tensorboard_log_dir", "updated_at", "wizard_step") VALUES (NEW."created_at", NEW."created_by_id", NEW."deployment_parameters_id", NEW."header_role", NEW."id", NEW."image_compatibility_confirmed", NEW."launch_list_id", NEW."name", NEW."network_domain", _pgh_attach_context(), NOW(), \'insert\', NEW."id", NEW."run_script", NEW."ssh_key_names", NEW."task_type", NEW."team_id", NEW."tensorboard_log_dir", NEW."updated_at", NEW."wizard_step"); RETURN NULL;', hash='8cd15c53332c5435406321ae315971c0e75e9f02', operation='INSERT', pgid='pgtrigger_insert_insert_8da9d', table='jobs_job', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='job',
            trigger=pgtrigger.compiler.Trigger(name='update_update', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD.* IS DISTINCT FROM NEW.*)', func='INSERT INTO "jobs_jobevent" ("created_at", "created_by_id", "deployment_parameters_id", "header_role", "id", "image_compatibility_confirmed", "launch_list_id", "name", "network_domain", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "run_script", "ssh_key_names", "task_type", "team_id", "tensorboard_log_dir", "updated_at", "wizard_step") VALUES (NEW."created_at", NEW."created_by_id", NEW."deployment_parameters_id", NEW."header_role", NEW."id", NEW."image_compatibility_confirmed", NEW."launch_list_id", NEW."name", NEW."network_domain", _pgh_attach_context(), NOW(), \'update\', NEW."id", NEW."run_script", NEW."ssh_key_names", NEW."task_type", NEW."team_id", NEW."tensorboard_log_dir", NEW."updated_at", NEW."wizard_step"); RETURN NULL;', hash='f483810ac40bfbe76482545ee27fd1b7f3aa280d', operation='UPDATE', pgid='pgtrigger_update_update_91845', table='jobs_job', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='job',
            trigger=pgtrigger.compiler.Trigger(name='delete_delete', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "jobs_jobevent" ("created_at", "created_by_id", "deployment_parameters_id", "header_role", "id", "image_compatibility_confirmed", "launch_list_id", "name", "network_domain", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "run_script", "ssh_key_names", "task_type", "team_id", "tensorboard_log_dir", "updated_at", "wizard_step") VALUES (OLD."created_at", OLD."created_by_id", OLD."deployment_parameters_id", OLD."header_role", OLD."id", OLD."image_compatibility_confirmed", OLD."launch_list_id", OLD."name", OLD."network_domain", _pgh_attach_context(), NOW(), \'delete\', OLD."id", OLD."run_script", OLD."ssh_key_names", OLD."task_type", OLD."team_id", OLD."tensorboard_log_dir", OLD."updated_at", OLD."wizard_step"); RETURN NULL;', hash='863e620f69f3e57dfb29bee3f244d413b3f70377', operation='DELETE', pgid='pgtrigger_delete_delete_dd1d0', table='jobs_job', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='runrecord',
            trigger=pgtrigger.compiler.Trigger(name='insert_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "jobs_runrecordevent" ("cancelled_at", "cluster", "deployment_parameters_snapshot", "failure_message", "findings_snapshot", "frozen_at", "frozen_by_id", "id", "job_id", "job_name", "launch_list_snapshot", "manifest_sha256", "manifest_yaml", "namespace", "pending_flagged", "pending_since", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "remote_uid", "state", "status_message", "status_reason", "submission_lease_until", "submitted_at", "team_id", "verifications_snapshot") VALUES (NEW."cancelled_at", NEW."cluster", NEW."deployment_parameters_snapshot", NEW."failure_message", NEW."findings_snapshot", NEW."frozen_at", NEW."frozen_by_id", NEW."id", NEW."job_id", NEW."job_name", NEW."launch_list_snapshot", NEW."manifest_sha256", NEW."manifest_yaml", NEW."namespace", NEW."pending_flagged", NEW."pending_since", _pgh_attach_context(), NOW(), \'insert\', NEW."id", NEW."remote_uid", NEW."state", NEW."status_message", NEW."status_reason", NEW."submission_lease_until", NEW."submitted_at", NEW."team_id", NEW."verifications_snapshot"); RETURN NULL;', hash='f4e1769c98e437ac21b51b52a843dc7e7780c7fb', operation='INSERT', pgid='pgtrigger_insert_insert_efba3', table='jobs_runrecord', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='runrecord',
            trigger=pgtrigger.compiler.Trigger(name='update_update', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."cancelled_at" IS DISTINCT FROM (NEW."cancelled_at") OR OLD."cluster" IS DISTINCT FROM (NEW."cluster") OR OLD."deployment_parameters_snapshot" IS DISTINCT FROM (NEW."deployment_parameters_snapshot") OR OLD."failure_message" IS DISTINCT FROM (NEW."failure_message") OR OLD."findings_snapshot" IS DISTINCT FROM (NEW."findings_snapshot") OR OLD."frozen_at" IS DISTINCT FROM (NEW."frozen_at") OR OLD."frozen_by_id" IS DISTINCT FROM (NEW."frozen_by_id") OR OLD."id" IS DISTINCT FROM (NEW."id") OR OLD."job_id" IS DISTINCT FROM (NEW."job_id") OR OLD."job_name" IS DISTINCT FROM (NEW."job_name") OR OLD."launch_list_snapshot" IS DISTINCT FROM (NEW."launch_list_snapshot") OR OLD."manifest_sha256" IS DISTINCT FROM (NEW."manifest_sha256") OR OLD."manifest_yaml" IS DISTINCT FROM (NEW."manifest_yaml") OR OLD."namespace" IS DISTINCT FROM (NEW."namespace") OR OLD."pending_flagged" IS DISTINCT FROM (NEW."pending_flagged") OR OLD."pending_since" IS DISTINCT FROM (NEW."pending_since") OR OLD."remote_uid" IS DISTINCT FROM (NEW."remote_uid") OR OLD."state" IS DISTINCT FROM (NEW."state") OR OLD."status_message" IS DISTINCT FROM (NEW."status_message") OR OLD."status_reason" IS DISTINCT FROM (NEW."status_reason") OR OLD."submission_lease_until" IS DISTINCT FROM (NEW."submission_lease_until") OR OLD."submitted_at" IS DISTINCT FROM (NEW."submitted_at") OR OLD."team_id" IS DISTINCT FROM (NEW."team_id") OR OLD."verifications_snapshot" IS DISTINCT FROM (NEW."verifications_snapshot"))', func='INSERT INTO "jobs_runrecordevent" ("cancelled_at", "cluster", "deployment_parameters_snapshot", "failure_message", "findings_snapshot", "frozen_at", "frozen_by_id", "id", "job_id", "job_name", "launch_list_snapshot", "manifest_sha256", "manifest_yaml", "namespace", "pending_flagged", "pending_since", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "remote_uid", "state", "status_message", "status_reason", "submission_lease_until", "submitted_at", "team_id", "verifications_snapshot") VALUES (NEW."cancelled_at", NEW."cluster", NEW."deployment_parameters_snapshot", NEW."failure_message", NEW."findings_snapshot", NEW."frozen_at", NEW."frozen_by_id", NEW."id", NEW."job_id", NEW."job_name", NEW."launch_list_snapshot", NEW."manifest_sha256", NEW."manifest_yaml", NEW."namespace", NEW."pending_flagged", NEW."pending_since", _pgh_attach_context(), NOW(), \'update\', NEW."id", NEW."remote_uid", NEW."state", NEW."status_message", NEW."status_reason", NEW."submission_lease_until", NEW."submitted_at", NEW."team_id", NEW."verifications_snapshot"); RETURN NULL;', hash='ebd2d78e5aff670c130738e76487b907f4748679', operation='UPDATE', pgid='pgtrigger_update_update_57445', table='jobs_runrecord', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='runrecord',
            trigger=pgtrigger.compiler.Trigger(name='delete_delete', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "jobs_runrecordevent" ("cancelled_at", "cluster", "deployment_parameters_snapshot", "failure_message", "findings_snapshot", "frozen_at", "frozen_by_id", "id", "job_id", "job_name", "launch_list_snapshot", "manifest_sha256", "manifest_yaml", "namespace", "pending_flagged", "pending_since", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "remote_uid", "state", "status_message", "status_reason", "submission_lease_until", "submitted_at", "team_id", "verifications_snapshot") VALUES (OLD."cancelled_at", OLD."cluster", OLD."deployment_parameters_snapshot", OLD."failure_message", OLD."findings_snapshot", OLD."frozen_at", OLD."frozen_by_id", OLD."id", OLD."job_id", OLD."job_name", OLD."launch_list_snapshot", OLD."manifest_sha256", OLD."manifest_yaml", OLD."namespace", OLD."pending_flagged", OLD."pending_since", _pgh_attach_context(), NOW(), \'delete\', OLD."id", OLD."remote_uid", OLD."state", OLD."status_message", OLD."status_reason", OLD."submission_lease_until", OLD."submitted_at", OLD."team_id", OLD."verifications_snapshot"); RETURN NULL;', hash='57d2a2490ebb13260a88a5cff34c03542e57261f', operation='DELETE', pgid='pgtrigger_delete_delete_7dac1', table='jobs_runrecord', when='AFTER')),
        ),
        migrations.AddConstraint(
            model_name='runrecord',
            constraint=models.CheckConstraint(condition=models.Q(('state', 'draft'), _negated=True), name='run_not_draft'),
        ),
    ]
