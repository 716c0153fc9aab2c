from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "rlark_site.foundation.tenancy"
    label = "tenancy"
    verbose_name = "Teams"
