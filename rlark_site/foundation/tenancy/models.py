from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from knox.models import AbstractAuthToken
from knox.settings import CONSTANTS

from rlark_site.foundation.audit.tracking import audited
from rlark_site.foundation.validators import no_control_characters

slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$",
    _("1–50 lower-case letters, digits or hyphens, starting and ending with a letter or digit."),
)


@audited()
class Team(models.Model):
    """A tenant: its members see and change only its jobs, records and keys."""

    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200, validators=[no_control_characters])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class MemberRole(models.TextChoices):
    MEMBER = "member", _("member")
    MAINTAINER = "maintainer", _("maintainer")


@audited()
class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=MemberRole.choices, default=MemberRole.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="unique_team_membership")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


@audited(exclude=["password"], model_name="UserEvent")
class AuditedUser(User):  # type: ignore[django-manager-missing]
    """auth.User under audit (a proxy, so its triggers' migrations live here): every change to
    an account is recorded with its actor, never the password hash."""

    class Meta:
        proxy = True


@audited(exclude=["digest"])
class ApiToken(AbstractAuthToken):
    """An API token (django-rest-knox): named, expiring, revocable by its owner, and stored only
    as a hash (`digest`); `token_key` is the first characters, enough to tell tokens apart."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    digest: models.CharField[str, str] = models.CharField(
        max_length=CONSTANTS.DIGEST_LENGTH, unique=True
    )
    name: models.CharField[str, str] = models.CharField(
        max_length=100, validators=[no_control_characters]
    )

    class Meta:
        ordering = ["-created"]
        verbose_name = _("API token")

    def __str__(self) -> str:
        return f"{self.name} ({self.token_key}…, {self.user})"
