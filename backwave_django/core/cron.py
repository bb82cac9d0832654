"""The cron dialect of recurring schedules, and its zoned next occurrence.

The dialect is deliberately small: 5 fields (``min hour dom month dow``) or 6 with the seconds
first, each a comma-separated list of ``*``, ``n`` or ``a-b``, optionally ``/step``. No macros, no
month or day names, no ``?``, ``L``, ``W`` or ``#``. When both day fields are restricted a day
matches if either does (Vixie cron); a field is "restricted" when its text is not exactly ``*``.

Why not wrap croniter: it accepts what this dialect must refuse (``@daily``, ``jan``, ``mon``,
``L``, a reversed range ``5-1`` read as a wrap-around), it reads ``5/1`` as 5..59 where this
dialect reads it as just 5, its error messages do not name the field and the part that is
wrong, and across a fall-back it fires the repeated wall-clock hour twice (``30 1 * * *`` in New
York fires at 05:30Z *and* 06:30Z on 2026-11-01). Pre-validating and post-filtering it would
need this parser anyway, so the parser is the whole implementation: one set of allowed values per
field, and a day-by-day search that is cheap enough for a 4-year bound.

Pure: no clock, no settings, no I/O beyond the stdlib's tz database lookup in ``zoneinfo``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .validation import require_aware

#: How far ahead a search looks before it decides the expression never fires (``0 0 30 2 *``).
SEARCH_BOUND = timedelta(days=4 * 365 + 1)
#: Zoned evaluation gives up after this much wall-clock advance over candidates that map to an
#: instant at or before the cursor (only the repeated hour of a fall-back produces such candidates).
ZONED_ADVANCE_BOUND = timedelta(hours=25)
#: A wall-clock time inside a spring-forward gap steps forward this much at a time ...
GAP_STEP = timedelta(minutes=1)
#: ... at most this many times, to the first valid local time.
MAX_GAP_STEPS = 26 * 60

_NUMBER = re.compile(r"[0-9]+")

# (name used in messages, lowest value, highest value), in 6-field order.
_SECONDS = ("seconds", 0, 59)
_MINUTES = ("minutes", 0, 59)
_HOURS = ("hours", 0, 23)
_DAY_OF_MONTH = ("day-of-month", 1, 31)
_MONTH = ("month", 1, 12)
_DAY_OF_WEEK = ("day-of-week", 0, 7)
_FIELDS = (_SECONDS, _MINUTES, _HOURS, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK)


def _number(field: str, text: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"Cron {field} field contains a non-numeric part '{text}'.")
    return int(text)


def _parse_field(text: str, spec: tuple[str, int, int]) -> tuple[int, ...]:
    """The sorted values one field allows; raises ``ValueError`` naming the field and the bad part."""
    field, low, high = spec
    values: set[int] = set()
    for part in text.split(","):
        range_text, slash, step_text = part.partition("/")
        step = _number(field, step_text) if slash else 1
        if range_text == "*":
            first, last = low, high
        elif "-" in range_text:
            first_text, _, last_text = range_text.partition("-")
            first, last = _number(field, first_text), _number(field, last_text)
        else:
            first = _number(field, range_text)
            # "n/step" runs from n to the field's maximum; "n/1" (and plain "n") is just n.
            last = high if step > 1 else first
        if step < 1 or first > last or first < low or last > high:
            raise ValueError(f"Cron {field} field part '{part}' is out of range {low}-{high}.")
        values.update(range(first, last + 1, step))
    if spec is _DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)  # 7 is Sunday, like 0
    return tuple(sorted(values))


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression. Build one with :meth:`parse`; ``canonical`` is what is stored."""

    #: The 6-field form, seconds first (``"0 0 2 * * *"``); parsing it again gives the same value.
    canonical: str
    #: 1 for a 6-field expression, 60 for a 5-field one: the step of :meth:`next_after`.
    resolution_seconds: int
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    #: 0 = Sunday ... 6 = Saturday.
    days_of_week: tuple[int, ...]
    day_of_month_restricted: bool
    day_of_week_restricted: bool

    @classmethod
    def parse(cls, expression: str) -> CronExpression:
        """Parse ``expression``; raise ``ValueError`` saying which field and part is wrong."""
        if not isinstance(expression, str):
            raise TypeError(f"cron must be a str, got {type(expression).__name__}")
        if not expression.strip():
            raise ValueError("Cron expression must not be empty.")
        # Only spaces separate fields: a tab stays inside its field and is refused there.
        fields = [f for f in expression.split(" ") if f]
        if len(fields) == 5:
            fields.insert(0, "0")
            resolution = 60
        elif len(fields) == 6:
            resolution = 1
        else:
            raise ValueError(
                f"Cron expression '{expression}' must have 5 fields (or 6 with leading seconds)."
            )
        seconds, minutes, hours, dom, months, dow = (
            _parse_field(text, spec) for text, spec in zip(fields, _FIELDS, strict=True)
        )
        return cls(
            canonical=" ".join(fields),
            resolution_seconds=resolution,
            seconds=seconds,
            minutes=minutes,
            hours=hours,
            days_of_month=dom,
            months=months,
            days_of_week=dow,
            day_of_month_restricted=fields[3] != "*",
            day_of_week_restricted=fields[5] != "*",
        )

    def __str__(self) -> str:
        return self.canonical

    def matches_day(self, day: date) -> bool:
        """Whether the expression fires on ``day`` at all (month and the day fields)."""
        if day.month not in self.months:
            return False
        dom_ok = day.day in self.days_of_month
        dow_ok = (day.weekday() + 1) % 7 in self.days_of_week
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return dom_ok or dow_ok
        return dom_ok and dow_ok

    def next_after(self, instant: datetime) -> datetime | None:
        """The first matching UTC instant strictly after ``instant``; ``None`` if none within 4 years."""
        require_aware("instant", instant)
        wall = instant.astimezone(UTC).replace(tzinfo=None)
        found = self.next_wall_time_after(wall)
        return None if found is None else found.replace(tzinfo=UTC)

    def next_wall_time_after(self, wall: datetime) -> datetime | None:
        """The first matching naive wall-clock time strictly after the naive ``wall``, or ``None``.

        ``wall`` is truncated to the resolution (1 s or 1 min), then one step is added.
        """
        if wall.tzinfo is not None:
            raise ValueError(f"wall must be a naive wall-clock datetime, got {wall.isoformat()}")
        step = self.resolution_seconds
        into_day = wall.hour * 3600 + wall.minute * 60 + wall.second
        start = datetime.combine(wall.date(), datetime.min.time()) + timedelta(
            seconds=into_day - into_day % step
        )
        try:
            start += timedelta(seconds=step)
            limit = start + SEARCH_BOUND
        except OverflowError:
            return None
        day = start.date()
        earliest = (start.hour, start.minute, start.second)
        while day <= limit.date():
            if self.matches_day(day):
                time_of_day = self._first_time_of_day_from(*earliest)
                if time_of_day is not None:
                    found = datetime(day.year, day.month, day.day, *time_of_day)
                    return found if found <= limit else None
            if day == date.max:
                return None
            day += timedelta(days=1)
            earliest = (0, 0, 0)
        return None

    def _first_time_of_day_from(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        """The earliest allowed (hour, minute, second) at or after the given one on the same day."""
        for h in self.hours[bisect_left(self.hours, hour) :]:
            first_minute = minute if h == hour else 0
            for m in self.minutes[bisect_left(self.minutes, first_minute) :]:
                first_second = second if (h, m) == (hour, minute) else 0
                i = bisect_left(self.seconds, first_second)
                if i < len(self.seconds):
                    return (h, m, self.seconds[i])
        return None


#: The most days each month has (February in a leap year).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _spoken_list(words: list[str], joiner: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {joiner} {words[-1]}"


def never_fires_reason(cron: CronExpression) -> str | None:
    """Why ``cron`` can never fire (``February has no 30th``), or None when it fires at some time.

    Every field allows at least one value once parsed, so only the calendar can rule a cron out:
    a day-of-week restriction matches some day of every month (alone, or OR-ed with a restricted
    day-of-month, the Vixie rule of :meth:`CronExpression.matches_day`), and an unrestricted
    day-of-month matches every day. What is left is a restricted day-of-month that no chosen month
    has; February 29th counts as a day February has (it recurs in leap years).
    """
    if cron.day_of_week_restricted or not cron.day_of_month_restricted:
        return None
    if any(day <= _MONTH_DAYS[month - 1] for month in cron.months for day in cron.days_of_month):
        return None
    months = [_MONTH_NAMES[month - 1] for month in cron.months]
    days = [_ordinal(day) for day in cron.days_of_month]
    verb = "has" if len(months) == 1 else "have"
    return f"{_spoken_list(months, 'and')} {verb} no {_spoken_list(days, 'or')}"


def require_fires(expression: str) -> CronExpression:
    """Parse ``expression`` and refuse one that never fires: ``ValueError`` naming the problem,
    e.g. ``'0 0 30 2 *' never fires: February has no 30th``. The check every schedule save uses."""
    cron = CronExpression.parse(expression)
    reason = never_fires_reason(cron)
    if reason is not None:
        raise ValueError(f"'{expression}' never fires: {reason}")
    return cron


def resolve_zone(zone: str) -> ZoneInfo:
    """The IANA zone named ``zone``; ``ValueError`` naming the id if it does not resolve.

    ``ZoneInfo`` keeps its own cache of loaded zones, so calling this per tick costs a dict lookup.
    """
    if not isinstance(zone, str):
        raise TypeError(f"time_zone must be a str or None, got {type(zone).__name__}")
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        reason = str(exc).strip("'\"") or type(exc).__name__
        raise ValueError(f"Unresolvable time-zone id '{zone}': {reason}") from None


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """Map a naive local wall time to UTC by the schedule DST rules.

    A repeated (fall-back) time maps to its first occurrence: ``fold=0`` is the earlier instant,
    with the pre-transition offset. A time inside a spring-forward gap steps forward a minute at a
    time to the first valid local time.
    """
    candidate = wall
    for _ in range(MAX_GAP_STEPS + 1):
        instant = candidate.replace(tzinfo=zone, fold=0).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == candidate:
            return instant
        candidate += GAP_STEP
    return None


def next_after(cron: CronExpression, cursor: datetime, zone: str | None = None) -> datetime | None:
    """The first tick of ``cron`` strictly after ``cursor``, evaluated on ``zone``'s wall clock.

    ``zone`` is an IANA id; ``None`` means UTC. The result is a UTC instant, or ``None`` when the
    expression never fires within the search bound. A wall-clock time that a spring-forward skips
    fires once at the first valid minute after the gap; a repeated fall-back time fires once, at
    its first occurrence. An unknown zone raises ``ValueError`` naming it.
    """
    require_aware("cursor", cursor)
    if zone is None:
        return cron.next_after(cursor)
    tz = resolve_zone(zone)
    cursor = cursor.astimezone(UTC)
    start = cursor.astimezone(tz).replace(tzinfo=None)
    wall: datetime | None = start
    while wall is not None and wall - start <= ZONED_ADVANCE_BOUND:
        wall = cron.next_wall_time_after(wall)
        if wall is None:
            return None
        instant = _wall_to_utc(wall, tz)
        if instant is not None and instant > cursor:
            return instant
    return None
