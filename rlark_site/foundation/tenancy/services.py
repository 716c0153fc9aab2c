from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import AnyUser, is_platform_admin
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

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


def _field_errors(error: ValidationError, field: str) -> ApplicationError:
    """A Django ValidationError (of a model or of the password validators) as a 400 on `field`."""
    messages = error.message_dict.get(field) if hasattr(error, "error_dict") else None
    messages = list(messages or error.messages)
    return ApplicationError(messages[0], extra={"field": field, "errors": {field: messages}})


@transaction.atomic
def account_create(*, username: str, password: str, platform_admin: bool = False) -> Any:
    """A new account, the username checked by Django's rules and the password by
    AUTH_PASSWORD_VALIDATORS. Callers decide who may: the API and the portal let platform admins
    only (`member_add`); `manage.py create_account` is the operator's."""
    user = User(username=username, is_staff=platform_admin)
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise _field_errors(exc, "username") from exc
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise _field_errors(exc, "password") from exc
    user.set_password(password)
    user.save()
    return user


def _existing_account(*, actor: AnyUser, username: str, password: str | None) -> Any | None:
    user = User.objects.filter(username=username).first()
    if user is None:
        return None
    if password:
        raise ApplicationError(
            _("The account %(username)s exists already; its password is not changed here.")
            % {"username": username}, extra={"field": "password"},
        )
    if user.is_staff and not is_platform_admin(actor):
        raise ApplicationError(
            _("Platform admins are added to teams by platform admins only."),
            extra={"field": "username"},
        )
    return user


@transaction.atomic
def member_add(*, actor: AnyUser, team: Team, username: str, role: str = MemberRole.MEMBER,
               password: str | None = None) -> Membership:
    """Add an existing account to the team, or change its role there.

    Only platform admins create accounts (`password` given for a new username); a maintainer
    names an account that exists, and never a platform admin's.
    """
    if role not in MemberRole.values:
        raise ApplicationError(
            _("Unknown role %(role)s; use one of %(roles)s.")
            % {"role": role, "roles": ", ".join(MemberRole.values)}
        )
    user = _existing_account(actor=actor, username=username, password=password)
    if user is None:
        user = _new_account(actor=actor, username=username, password=password)
    membership, created = Membership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def _new_account(*, actor: AnyUser, username: str, password: str | None) -> Any:
    if not is_platform_admin(actor):
        raise ApplicationError(
            _("There is no account named %(username)s. Only platform admins create accounts; "
              "ask one to create it.") % {"username": username},
            extra={"field": "username"},
        )
    if not password:
        raise ApplicationError(_("A new user needs a password."), extra={"field": "password"})
    return account_create(username=username, password=password)
