"""`Node.last_seen` is stored only for vanished nodes from now on.

A present node was listed by its cluster's last successful poll (`Node.seen_at`), so polls
no longer rewrite every row; the values they wrote before are cleared so the column means
one thing. Vanished nodes keep theirs: the last poll that listed them.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("clusters", "0005_cluster_label_index")]

    operations = [
        migrations.RunSQL(
            sql="UPDATE clusters_node SET last_seen = NULL WHERE NOT gone",
            reverse_sql="""
                UPDATE clusters_node n SET last_seen = c.last_success_at
                FROM clusters_cluster c WHERE c.id = n.cluster_id AND NOT n.gone
            """,
        ),
    ]
