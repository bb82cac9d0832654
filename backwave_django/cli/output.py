"""How the CLI writes: aligned tables and UTC times for people, JSON for programs.

Tables pad every column to its widest cell (the last column is not padded) and write times as
``2026-03-01T12:00:00Z``; JSON writes them in full (``2026-03-01T12:00:00.123456+00:00``).
Messages about the run (refusals, progress, usage errors) go to stderr, results to stdout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol


class Stream(Protocol):
    def write(self, msg: str = "", style_func: Any = None, ending: str | None = None) -> None: ...


def when(moment: datetime | None) -> str:
    """A time in a table: UTC, to the second, ISO 8601; ``-`` for none."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instant(moment: datetime | None) -> str | None:
    """A time in JSON: UTC, ISO 8601 in full; null for none."""
    return None if moment is None else moment.astimezone(UTC).isoformat()


def seconds(duration: timedelta | None) -> float | None:
    return None if duration is None else duration.total_seconds()


def span(duration: timedelta) -> str:
    """A duration for people: ``45s``, ``12m 05s``, ``3h 02m``, ``2d 04h``."""
    total = max(int(duration.total_seconds()), 0)
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


class Output:
    """The command's stdout and stderr (Django's wrappers, which end every write with a newline)."""

    def __init__(self, stdout: Stream, stderr: Stream) -> None:
        self.stdout = stdout
        self.stderr = stderr

    def line(self, text: str = "") -> None:
        self.stdout.write(text)

    def error(self, text: str) -> None:
        self.stderr.write(text)

    def json(self, value: Any) -> None:
        self.stdout.write(json.dumps(value, indent=2, ensure_ascii=False))

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[object]], *, indent: str = "") -> None:
        cells = [list(headers)] + [[str(cell) for cell in row] for row in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
        for row in cells:
            padded = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
            self.stdout.write(indent + "  ".join([*padded, row[-1]]).rstrip())
