from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_site.audit.tracking import audited
from rlark_site.validators import no_control_characters

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
