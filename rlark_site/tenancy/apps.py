from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "rlark_site.tenancy"
    label = "tenancy"
    verbose_name = "Teams"
