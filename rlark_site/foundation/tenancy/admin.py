"""The Django admin sees API tokens by name, owner and dates: never a secret nor its digest."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from rlark_site.foundation.tenancy.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "token_key", "created", "expiry")
    search_fields = ("name", "user__username", "token_key")
    fields = ("name", "user", "token_key", "created", "expiry")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
