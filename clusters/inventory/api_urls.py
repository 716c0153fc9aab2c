from django.urls import URLPattern, URLResolver, path

from clusters.inventory import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/", api.ClusterListView.as_view(), name="clusters"),
    path("clusters/from-kubeconfig/", api.ClusterKubeconfigView.as_view(),
         name="clusters-from-kubeconfig"),
    path("clusters/<slug:name>/", api.ClusterDetailView.as_view(), name="cluster-detail"),
    path("clusters/<slug:name>/poll/", api.ClusterPollView.as_view(), name="cluster-poll"),
    path("clusters/<slug:name>/queues/", api.ClusterQueuesView.as_view(), name="cluster-queues"),
    path("nodes/", api.NodeListView.as_view(), name="nodes"),
]
