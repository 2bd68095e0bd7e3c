#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")
    from django.core.management import execute_from_command_line

    from kernelevolve_site.embedded_redis import hold_for_command

    hold_for_command(sys.argv)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
