#!/usr/bin/env python
"""Django's command-line utility; starts embedded PostgreSQL/Redis when no URLs are set."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    from django.core.management import execute_from_command_line

    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        execute_from_command_line(sys.argv)
        return
    from rlark_site.devservices import services

    with services():
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
