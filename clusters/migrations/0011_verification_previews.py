"""Stored snapshots keep their first nodes (all, outside the request's cluster, NotReady) with
their summary, so showing a request never reads its whole node list
(`clusters.verifications.services._previews`). Snapshots stored before get theirs here; the
audit trigger is skipped: the previews only restate the snapshot, whose every version is
audited already."""

import pgtrigger
from django.db import migrations

PREVIEW = 50
_FIRST = """coalesce((SELECT jsonb_agg(s.e ORDER BY s.i) FROM (
    SELECT t.e, t.i FROM jsonb_array_elements(v.matches) WITH ORDINALITY AS t(e, i)
    WHERE {condition} ORDER BY t.i LIMIT {limit}) AS s), '[]'::jsonb)"""
_BACKFILL_SQL = f"""
UPDATE clusters_verification v SET match_summary = v.match_summary || jsonb_build_object(
    'first_nodes', {_FIRST.format(condition="true", limit=PREVIEW)},
    'first_outside', {_FIRST.format(condition="t.e->>'cluster' <> c.name", limit=PREVIEW)},
    'first_not_ready', {_FIRST.format(condition="t.e->'ready' = 'false'::jsonb", limit=PREVIEW)}
)
FROM clusters_cluster c
WHERE c.id = v.cluster_id AND NOT v.match_summary ? 'first_nodes'
"""


def keep_previews(apps, schema_editor):
    with pgtrigger.ignore("clusters.Verification:update_update"):
        schema_editor.execute(_BACKFILL_SQL)


class Migration(migrations.Migration):

    dependencies = [
        ("clusters", "0010_audit_no_truncate"),
    ]

    operations = [
        migrations.RunPython(keep_previews, migrations.RunPython.noop, elidable=True),
    ]
