"""The operator CLI, ``manage.py backwave`` (docs/cli.md): parsing, output and the subcommands.

The management command (``management/commands/backwave.py``) is a thin shell over :func:`add_subcommands`
and :func:`run`. Reads go through :mod:`backwave_django.monitor`, actions through
:mod:`backwave_django.operator` with the actor ``cli:{os user}``; nothing here touches a row.

- :mod:`.jobs`: ``jobs`` and ``show``;
- :mod:`.actions`: ``cancel``, ``requeue``, ``retry-now`` and ``purge``;
- :mod:`.queues`: ``queues`` (with ``pause``, ``resume``, ``limit``, ``remove``) and ``schedules``
  (``trigger``);
- :mod:`.limits`: ``limits`` (with ``set`` and ``clear``);
- :mod:`.stats`: ``stats``;
- :mod:`.values` reads the operator's words, :mod:`.output` writes tables and JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import actions, jobs, limits, queues, stats
from .output import Output
from .values import EXIT_DONE, EXIT_REFUSED, EXIT_USAGE, UsageError

__all__ = ["EXIT_DONE", "EXIT_REFUSED", "EXIT_USAGE", "Output", "UsageError", "add_subcommands", "run"]


def add_subcommands(parser: Any) -> None:
    """Add the subcommands to the command's parser (a Django ``CommandParser``)."""
    subparsers = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    jobs.add_arguments(subparsers)
    actions.add_arguments(subparsers)
    queues.add_arguments(subparsers)
    limits.add_arguments(subparsers)
    stats.add_arguments(subparsers)


def run(options: dict[str, Any], out: Output) -> int:
    """Run the parsed subcommand; its exit status (a usage error is reported here: status 2)."""
    handler: Callable[[dict[str, Any], Output], int] = options["run"]
    try:
        return handler(options, out)
    except UsageError as error:
        out.error(f"backwave {options['command']}: {error}")
        return EXIT_USAGE
