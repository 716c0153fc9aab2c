from django.urls import URLPattern, URLResolver, path

from jobs.drafts import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("ssh-keys/", views.ssh_keys, name="ssh-keys"),
    path("ssh-keys/<int:pk>/delete/", views.ssh_key_delete_view, name="ssh-key-delete"),
]
