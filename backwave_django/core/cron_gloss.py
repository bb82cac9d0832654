"""A plain-English gloss of a cron expression, for the operator console ("Daily at 02:00").

Only the common shapes get a gloss; anything else (lists, ranges other than weekdays, a month
restriction, a non-zero seconds field, both day fields restricted, an invalid expression) comes
back as the raw expression, so the console never shows a sentence that could be wrong.

Pure: no clock, no settings, no I/O.
"""

from __future__ import annotations

import re

from .cron import CronExpression

_NUMBER = re.compile(r"[0-9]+")
_EVERY = re.compile(r"\*/([0-9]+)")
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _number(text: str) -> int | None:
    return int(text) if _NUMBER.fullmatch(text) else None


def _step(text: str) -> int | None:
    """N for ``*/N``; 1 for ``*`` (every value); None otherwise."""
    if text == "*":
        return 1
    match = _EVERY.fullmatch(text)
    return int(match.group(1)) if match else None


def _every(count: int, unit: str) -> str:
    return f"Every {unit}" if count == 1 else f"Every {count} {unit}s"


def describe(cron: str) -> str:
    """The gloss of ``cron`` (5 fields, or 6 with seconds first), or ``cron`` itself.

    Examples: ``* * * * *`` → "Every minute", ``*/5 * * * *`` → "Every 5 minutes",
    ``0 2 * * *`` → "Daily at 02:00", ``30 9 * * 1-5`` → "Weekdays at 09:30",
    ``15 * * * *`` → "At minute 15 of every hour", ``0 0 1 * *`` → "Monthly on day 1 at 00:00".
    """
    try:
        canonical = CronExpression.parse(cron).canonical
    except (TypeError, ValueError):
        return cron
    seconds, minute, hour, day_of_month, month, day_of_week = canonical.split(" ")
    if _number(seconds) != 0 or month != "*":
        return cron
    gloss = _describe_time_and_days(minute, hour, day_of_month, day_of_week)
    return gloss if gloss is not None else cron


def _describe_time_and_days(minute: str, hour: str, day_of_month: str, day_of_week: str) -> str | None:
    every_day = day_of_month == "*" and day_of_week == "*"
    minute_step, hour_step = _step(minute), _step(hour)
    at_minute, at_hour = _number(minute), _number(hour)
    if every_day and hour == "*" and minute_step is not None:
        return _every(minute_step, "minute")
    if every_day and at_minute is not None and hour_step is not None:
        if hour_step == 1:
            return "Every hour" if at_minute == 0 else f"At minute {at_minute} of every hour"
        return _every(hour_step, "hour") if at_minute == 0 else None
    if at_minute is None or at_hour is None:
        return None
    time = f"{at_hour:02d}:{at_minute:02d}"
    if every_day:
        return f"Daily at {time}"
    if day_of_month == "*":
        if day_of_week == "1-5":
            return f"Weekdays at {time}"
        weekday = _number(day_of_week)
        return None if weekday is None else f"Weekly on {_DAY_NAMES[weekday % 7]} at {time}"
    day = _number(day_of_month)
    if day is not None and day_of_week == "*":
        return f"Monthly on day {day} at {time}"
    return None
