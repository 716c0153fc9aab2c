from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from rlark_site.exceptions import ApplicationError
from rlark_site.tenancy.models import MemberRole, Membership, Team

User = get_user_model()


@transaction.atomic
def team_create(*, slug: str, name: str) -> Team:
    team = Team(slug=slug, name=name)
    team.full_clean()
    try:
        with transaction.atomic():
            team.save()
    except IntegrityError as exc:
        raise ApplicationError(
            _("A team with slug %(slug)s already exists.") % {"slug": slug}
        ) from exc
    return team


@transaction.atomic
def member_add(*, team: Team, username: str, role: str = MemberRole.MEMBER,
               password: str | None = None) -> Membership:
    """Add a member, creating the user when new (a new user needs a password)."""
    if role not in MemberRole.values:
        raise ApplicationError(
            _("Unknown role %(role)s; use one of %(roles)s.")
            % {"role": role, "roles": ", ".join(MemberRole.values)}
        )
    user: AbstractBaseUser | None = User.objects.filter(username=username).first()
    if user is None:
        if not password:
            raise ApplicationError(_("A new user needs a password."))
        user = User(username=username)
        user.full_clean(exclude=["password"])
        user.set_password(password)
        user.save()
    membership, created = Membership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership
