"""Leave room on every heap page of clusters_node for one new version of each row.

Each inventory poll rewrites `last_seen` on every node. With free space on the page
PostgreSQL makes that a HOT update (no new entries in the five indexes, GIN included);
on full pages every poll would add an index entry per node and bloat the indexes.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("clusters", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql="ALTER TABLE clusters_node SET (fillfactor = 50)",
            reverse_sql="ALTER TABLE clusters_node RESET (fillfactor)",
        ),
    ]
