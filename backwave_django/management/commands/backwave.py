"""``manage.py backwave``: the operator CLI (docs/cli.md).

A thin shell: the subcommands, their parsing and their output live in :mod:`backwave_django.cli`;
reads go through ``monitor``, actions through ``operator`` (audited as ``cli:{os user}``).
Exit status: 0 done, 1 refused (not found, not cancellable, …), 2 bad usage or input.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import cli


class Command(BaseCommand):
    help = (
        "Operate BackWave from a shell: list and show jobs, cancel, requeue or retry them, pause "
        "and limit queues, trigger schedules, purge by retention, and print stats. Actions are "
        "audited as cli:{os user}. Exit status: 0 done, 1 refused, 2 bad usage or input."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_subcommands(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = cli.run(options, cli.Output(self.stdout, self.stderr))
        if status == cli.EXIT_DONE:
            return
        if getattr(self, "_called_from_command_line", False):
            sys.exit(status)
        raise CommandError(f"backwave {options['command']} exited with status {status}", returncode=status)
