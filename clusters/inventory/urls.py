from django.urls import URLPattern, URLResolver, path

from clusters.inventory import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.cluster_list_view, name="list"),
    path("add/", views.cluster_add_view, name="add"),
    path("add/kubeconfig/", views.cluster_add_kubeconfig_view, name="add-kubeconfig"),
    path("nodes/", views.node_list_view, name="nodes"),
    path("cluster/<slug:name>/", views.cluster_detail_view, name="detail"),
    path("cluster/<slug:name>/edit/", views.cluster_edit_view, name="edit"),
    path("cluster/<slug:name>/admission/", views.cluster_admission_view, name="admission"),
    path("cluster/<slug:name>/enabled/", views.cluster_enabled_view, name="enabled"),
    path("cluster/<slug:name>/poll/", views.cluster_poll_view, name="poll"),
]
