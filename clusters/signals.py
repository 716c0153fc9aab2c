"""Signals other parts of RLark listen to, so the inventory does not need to know them."""

from django.dispatch import Signal

# Sent after an inventory poll committed a change to a cluster's node set, labels,
# allocatable or readiness. kwargs: cluster (Cluster), generation (int).
inventory_changed = Signal()
