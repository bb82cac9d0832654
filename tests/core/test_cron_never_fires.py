"""A cron that can never fire is refused, with the calendar reason (``core.cron.never_fires_reason``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings, strategies as st

from backwave_django.core import planner
from backwave_django.core.cron import CronExpression, never_fires_reason, next_after, require_fires


@pytest.mark.parametrize(
    ("cron", "reason"),
    [
        ("0 0 30 2 *", "February has no 30th"),
        ("0 0 31 4 *", "April has no 31st"),
        ("0 0 31 4,6,9,11 *", "April, June, September and November have no 31st"),
        ("0 0 30,31 2 *", "February has no 30th or 31st"),
        ("0 0 0 31 2 *", "February has no 31st"),  # six fields
        ("0 0 30-31 2 *", "February has no 30th or 31st"),
    ],
)
def test_a_day_no_chosen_month_has_never_fires_and_says_why(cron, reason):
    assert never_fires_reason(CronExpression.parse(cron)) == reason
    message = f"'{cron}' never fires: {reason}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        require_fires(cron)


@pytest.mark.parametrize(
    "cron",
    [
        "0 0 29 2 *",  # leap years
        "0 0 30 2 1",  # day-of-month OR day-of-week: every Monday in February
        "0 0 31 2 */2",
        "0 0 31 1-2 *",  # January has a 31st
        "0 0 * 2 1",
        "* * * * *",
    ],
)
def test_a_cron_that_fires_somewhere_is_accepted(cron):
    assert never_fires_reason(CronExpression.parse(cron)) is None
    assert require_fires(cron).canonical == CronExpression.parse(cron).canonical


def test_a_schedule_definition_that_never_fires_is_refused_by_the_save_check():
    with pytest.raises(ValueError, match="never fires: February has no 30th"):
        planner.require_schedulable("0 0 30 2 *", "Europe/Berlin")
    with pytest.raises(ValueError, match="Unresolvable time-zone id"):
        planner.require_schedulable("0 0 1 * *", "Mars/Olympus_Mons")


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    single = number.map(str)
    span = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(span, st.integers(1, 5)).map(lambda p: f"{p[0]}/{p[1]}")
    part = st.one_of(single, span, stepped)
    return st.one_of(st.just("*"), st.lists(part, min_size=1, max_size=3).map(",".join))


#: Any cron, and (as often) the end of a short month, where the crons that never fire are.
SHORT_MONTHS = st.lists(st.sampled_from([2, 4, 6, 9, 11]), min_size=1, max_size=3).map(
    lambda months: ",".join(map(str, months))
)
CRONS = st.one_of(
    st.tuples(_field(1, 31), _field(1, 12), _field(0, 6)),
    st.tuples(_field(29, 31), SHORT_MONTHS, st.one_of(st.just("*"), _field(0, 6))),
).map(lambda f: f"0 0 {f[0]} {f[1]} {f[2]}")
#: Between 1904 and 2096 leap years come every 4 years, so the search bound of ``next_after``
#: (4 years and a day) reaches any February 29th.
INSTANTS = st.datetimes(datetime(1904, 1, 1), datetime(2092, 1, 1)).map(lambda d: d.replace(tzinfo=UTC))


@settings(max_examples=300, deadline=None)
@given(CRONS, INSTANTS)
def test_a_cron_said_to_fire_has_a_next_occurrence_and_one_said_not_to_has_none(cron, instant):
    expression = CronExpression.parse(cron)
    fires = never_fires_reason(expression) is None
    assert (next_after(expression, instant) is not None) == fires


def test_a_stored_cron_that_never_fires_reports_why_where_next_due_is_shown():
    cursor = datetime(2026, 1, 1, tzinfo=UTC)
    reason = "'0 0 0 30 2 *' never fires: February has no 30th"
    assert planner.schedule_error("0 0 0 30 2 *", None) == reason
    assert planner.next_due("0 0 0 30 2 *", "Europe/Berlin", cursor) == (None, reason)
    assert planner.next_due("0 0 2 * * *", None, cursor) == (datetime(2026, 1, 1, 2, tzinfo=UTC), None)
