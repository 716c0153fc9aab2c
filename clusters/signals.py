"""Signals other parts of RLark listen to, so the inventory does not need to know them."""

from django.dispatch import Signal

# Sent after an inventory poll committed a change to a cluster's node set, labels,
# allocatable or readiness. kwargs: cluster (Cluster), generation (int).
inventory_changed = Signal()

# Sent inside the transaction that moved a verification: a new request, a decision, or an
# approval gone stale. kwargs: verification (Verification, as saved), transition
# ("requested", "approved", "rejected" or "stale"). Receivers run in that transaction, so
# whatever they write commits or rolls back with the change (notifications use this).
verification_changed = Signal()

# Sent by the admin queue for the requests a page shows, to learn the pre-flight (SPEC 15) of
# the jobs they were asked for (the jobs app knows jobs; this app does not). kwargs:
# verifications (a list of Verification). A receiver answers {verification id:
# [clusters.verifications.capacity.JobCapacity]}, read in a number of queries that does not
# grow with the verifications.
queue_capacity = Signal()
