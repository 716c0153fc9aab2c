"""Create a platform account from the shell (the operator's path; the API and the Django admin
are the platform admins')."""

from __future__ import annotations

import getpass
import os
from typing import Any

import pghistory
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team
from rlark_site.foundation.tenancy.services import account_create

PASSWORD_ENV = "RLARK_NEW_PASSWORD"


class Command(BaseCommand):
    help = (f"Create an account (password from ${PASSWORD_ENV} or a prompt; the password "
            "validators apply), optionally a platform admin or a member of a team.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--platform-admin", action="store_true")
        parser.add_argument("--team", help="team slug to add the account to")
        parser.add_argument("--role", choices=MemberRole.values, default=MemberRole.MEMBER)

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get(PASSWORD_ENV) or getpass.getpass("Password: ")
        try:
            with transaction.atomic(), pghistory.context(command="create_account"):
                user = account_create(username=options["username"], password=password,
                                      platform_admin=options["platform_admin"])
                if options["team"]:
                    team = Team.objects.filter(slug=options["team"]).first()
                    if team is None:
                        raise CommandError(f"No team {options['team']}.")
                    Membership.objects.create(team=team, user=user, role=options["role"])
        except ApplicationError as exc:
            raise CommandError(f"{exc.extra.get('field', '')}: {exc.message}") from exc
        self.stdout.write(f"Created account {user.username}.")
