import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from backwave_django.core.cron import CronExpression, next_after, resolve_zone

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday
NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"


def raises_exactly(message: str):
    """Expect a ValueError whose message is exactly ``message``."""
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


def parse(text: str) -> CronExpression:
    return CronExpression.parse(text)


def ticks(cron: str, start: datetime, end: datetime, zone: str | None = None) -> list[datetime]:
    """Every tick strictly after ``start`` and at or before ``end``."""
    expression = parse(cron)
    found: list[datetime] = []
    tick = next_after(expression, start, zone)
    while tick is not None and tick <= end:
        found.append(tick)
        tick = next_after(expression, tick, zone)
    return found


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


# --- parsing and canonical form -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0 2 * * *", "0 0 2 * * *"),
        ("30 0 2 * * *", "30 0 2 * * *"),
        ("  0   2 * *  *  ", "0 0 2 * * *"),
        ("*/15 9-17 * * 1-5", "0 */15 9-17 * * 1-5"),
        ("0,30 * 1,15 */2 0,7", "0 0,30 * 1,15 */2 0,7"),
        ("* * * * * *", "* * * * * *"),
    ],
)
def test_canonical_form_is_six_fields_with_seconds_first(text, canonical):
    assert parse(text).canonical == canonical
    assert str(parse(text)) == canonical


@pytest.mark.parametrize("text", ["0 2 * * *", "5/10 1-3 * * * 1,3", "*/7 0 0 13 * 5"])
def test_canonical_form_is_a_parse_fixed_point(text):
    once = parse(text)
    twice = parse(once.canonical)
    assert twice.canonical == once.canonical
    start = utc(2026, 1, 1, 0, 0, 30)
    for _ in range(20):
        assert next_after(once, start) == next_after(twice, start)
        start = next_after(once, start)  # type: ignore[assignment]


@pytest.mark.parametrize(
    "text",
    ["", "   ", "* * * *", "* * * * * * *", "@daily", "0\t2 * * *", "1 2 3"],
)
def test_wrong_field_count_or_empty_input_is_refused(text):
    with pytest.raises(ValueError, match=r"must have 5 fields|must not be empty"):
        parse(text)


def test_field_count_message_quotes_the_expression():
    with raises_exactly("Cron expression '@daily' must have 5 fields (or 6 with leading seconds)."):
        parse("@daily")


def test_only_spaces_separate_fields_so_a_tab_is_a_non_numeric_part():
    with raises_exactly("Cron hours field contains a non-numeric part '0\t2'."):
        parse("0 0\t2 * * *")  # five fields: minutes "0", hours "0<tab>2", ...


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="cron must be a str"):
        CronExpression.parse(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("60 * * * * *", "Cron seconds field part '60' is out of range 0-59."),
        ("* 60 * * * *", "Cron minutes field part '60' is out of range 0-59."),
        ("* * 24 * * *", "Cron hours field part '24' is out of range 0-23."),
        ("* * * 0 * *", "Cron day-of-month field part '0' is out of range 1-31."),
        ("* * * 32 * *", "Cron day-of-month field part '32' is out of range 1-31."),
        ("* * * * 0 *", "Cron month field part '0' is out of range 1-12."),
        ("* * * * 13 *", "Cron month field part '13' is out of range 1-12."),
        ("* * * * * 8", "Cron day-of-week field part '8' is out of range 0-7."),
        ("5-1 * * * *", "Cron minutes field part '5-1' is out of range 0-59."),
        ("*/0 * * * *", "Cron minutes field part '*/0' is out of range 0-59."),
        ("1,2,70 * * * *", "Cron minutes field part '70' is out of range 0-59."),
        ("0 0 1-40/5 * *", "Cron day-of-month field part '1-40/5' is out of range 1-31."),
        ("0 0 * * 7-0", "Cron day-of-week field part '7-0' is out of range 0-7."),
    ],
)
def test_out_of_range_parts_name_the_field_and_the_part(text, message):
    with raises_exactly(message):
        parse(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 0 * jan *", "Cron month field contains a non-numeric part 'jan'."),
        ("0 0 * * mon", "Cron day-of-week field contains a non-numeric part 'mon'."),
        ("0 0 L * *", "Cron day-of-month field contains a non-numeric part 'L'."),
        ("0 0 ? * 1", "Cron day-of-month field contains a non-numeric part '?'."),
        ("0 0 * * 5#2", "Cron day-of-week field contains a non-numeric part '5#2'."),
        ("0 0 15W * *", "Cron day-of-month field contains a non-numeric part '15W'."),
        ("*/x * * * *", "Cron minutes field contains a non-numeric part 'x'."),
        ("1,,2 * * * *", "Cron minutes field contains a non-numeric part ''."),
        ("-5 * * * *", "Cron minutes field contains a non-numeric part ''."),
        ("0 +1 * * *", "Cron hours field contains a non-numeric part '+1'."),
        ("0 ٣ * * *", "Cron hours field contains a non-numeric part '٣'."),
        ("x 0 0 * * *", "Cron seconds field contains a non-numeric part 'x'."),
    ],
)
def test_non_numeric_parts_name_the_field_and_the_text(text, message):
    with raises_exactly(message):
        parse(text)


def test_every_field_accepts_its_bounds():
    expression = parse("0,59 0,59 0,23 1,31 1,12 0,7")
    assert expression.seconds == (0, 59)
    assert expression.minutes == (0, 59)
    assert expression.hours == (0, 23)
    assert expression.days_of_month == (1, 31)
    assert expression.months == (1, 12)
    assert expression.days_of_week == (0,)  # 7 is Sunday, the same as 0


def test_lists_ranges_and_steps_expand_to_the_allowed_values():
    expression = parse("1,5-7,50-59/4 */20 2-10/3 * * 5-7")
    assert expression.seconds == (1, 5, 6, 7, 50, 54, 58)
    assert expression.minutes == (0, 20, 40)
    assert expression.hours == (2, 5, 8)
    assert expression.days_of_week == (0, 5, 6)


def test_n_slash_step_runs_to_the_maximum_but_n_slash_one_is_just_n():
    assert parse("5/15 * * * *").minutes == (5, 20, 35, 50)
    assert parse("5/1 * * * *").minutes == (5,)
    assert next_after(parse("5/1 * * * *"), utc(2026, 1, 1, 0, 5)) == utc(2026, 1, 1, 1, 5)


def test_a_step_larger_than_the_range_keeps_only_the_start():
    assert parse("*/100 * * * *").minutes == (0,)


# --- next_after -----------------------------------------------------------------------------


def test_next_after_is_strictly_after():
    daily = parse("0 2 * * *")
    assert next_after(daily, utc(2026, 1, 1, 2)) == utc(2026, 1, 2, 2)
    assert next_after(daily, utc(2026, 1, 1, 1, 59, 59)) == utc(2026, 1, 1, 2)


def test_five_field_resolution_is_a_minute_and_truncates_the_start():
    every_minute = parse("* * * * *")
    assert next_after(every_minute, utc(2026, 1, 1, 0, 0, 30)) == utc(2026, 1, 1, 0, 1)
    assert next_after(every_minute, utc(2026, 1, 1, 0, 0, 0)) == utc(2026, 1, 1, 0, 1)


def test_every_second_six_field_cron_fires_every_second():
    start = utc(2026, 1, 1, 23, 59, 58, 500_000)
    assert ticks("* * * * * *", start, start + timedelta(seconds=3)) == [
        utc(2026, 1, 1, 23, 59, 59),
        utc(2026, 1, 2, 0, 0, 0),
        utc(2026, 1, 2, 0, 0, 1),
    ]


def test_six_field_seconds_field_is_honoured():
    assert ticks("15,45 30 2 * * *", T0, utc(2026, 1, 2)) == [
        utc(2026, 1, 1, 2, 30, 15),
        utc(2026, 1, 1, 2, 30, 45),
    ]


def test_the_method_and_the_function_agree_in_utc():
    expression = parse("*/7 3 * * *")
    assert expression.next_after(T0) == next_after(expression, T0) == next_after(expression, T0, "UTC")


def test_next_after_converts_an_aware_start_to_utc():
    start = datetime(2026, 1, 1, 3, 0, tzinfo=ZoneInfo(BERLIN))  # 02:00Z
    assert next_after(parse("0 * * * *"), start) == utc(2026, 1, 1, 3)


def test_next_after_refuses_a_naive_instant():
    with pytest.raises(ValueError, match="cursor must be timezone-aware"):
        next_after(parse("* * * * *"), datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="instant must be timezone-aware"):
        parse("* * * * *").next_after(datetime(2026, 1, 1))


def test_impossible_date_never_fires():
    assert next_after(parse("0 0 30 2 *"), T0) is None
    assert next_after(parse("0 0 31 4,6,9,11 *"), T0) is None
    assert next_after(parse("0 0 30 2 *"), T0, NEW_YORK) is None


def test_leap_day_fires_within_the_four_year_bound():
    assert next_after(parse("0 0 29 2 *"), T0) == utc(2028, 2, 29)
    assert next_after(parse("0 0 29 2 *"), utc(2028, 3, 1)) == utc(2032, 2, 29)


def test_search_near_the_end_of_the_calendar_returns_none_instead_of_overflowing():
    assert next_after(parse("0 0 1 1 *"), datetime(9999, 6, 1, tzinfo=UTC)) is None


def test_month_boundaries_and_year_rollover():
    assert next_after(parse("0 0 31 * *"), utc(2026, 1, 31)) == utc(2026, 3, 31)
    assert next_after(parse("0 0 1 1 *"), utc(2026, 1, 1)) == utc(2027, 1, 1)


# --- day-of-month and day-of-week -----------------------------------------------------------


def test_both_day_fields_restricted_means_either_matches():
    # 2026-02-13 is a Friday; 2026-03-13 is a Friday too; Fridays and 13ths both fire.
    fired = ticks("0 0 13 * 5", utc(2026, 2, 1), utc(2026, 3, 1))
    assert fired == [utc(2026, 2, 6), utc(2026, 2, 13), utc(2026, 2, 20), utc(2026, 2, 27)]
    june = ticks("0 0 13 * 5", utc(2026, 6, 1), utc(2026, 6, 30))
    assert utc(2026, 6, 12) in june  # Friday the 12th
    assert utc(2026, 6, 13) in june  # Saturday the 13th


def test_only_day_of_month_restricted_matches_that_field_alone():
    assert ticks("0 0 13 * *", utc(2026, 2, 1), utc(2026, 3, 31)) == [utc(2026, 2, 13), utc(2026, 3, 13)]


def test_only_day_of_week_restricted_matches_that_field_alone():
    # Sundays in January 2026, written as 7.
    assert ticks("0 0 * * 7", T0, utc(2026, 1, 31)) == [
        utc(2026, 1, 4),
        utc(2026, 1, 11),
        utc(2026, 1, 18),
        utc(2026, 1, 25),
    ]


def test_star_slash_one_counts_as_restricted():
    # dom "*/1" is restricted, so with dow 5 restricted too the OR makes every day match.
    assert len(ticks("0 0 */1 * 5", T0, utc(2026, 1, 10))) == 9
    assert ticks("0 0 * * 5", T0, utc(2026, 1, 10)) == [utc(2026, 1, 2), utc(2026, 1, 9)]


def test_weekday_ranges_use_sunday_zero():
    # Monday to Friday of the week of 2026-01-05 (a Monday).
    fired = ticks("0 9 * * 1-5", utc(2026, 1, 4), utc(2026, 1, 11))
    assert [t.day for t in fired] == [5, 6, 7, 8, 9]


# --- time zones and DST ---------------------------------------------------------------------


def test_daily_0230_new_york_fires_365_times_in_2026_across_both_changes():
    local = ZoneInfo(NEW_YORK)
    start = datetime(2026, 1, 1, tzinfo=local)
    end = datetime(2027, 1, 1, tzinfo=local)
    fired = ticks("30 2 * * *", start, end, NEW_YORK)
    assert len(fired) == 365
    assert len({t.astimezone(local).date() for t in fired}) == 365
    # Spring forward (2026-03-08): 02:30 does not exist, so it fires at 03:00 EDT.
    assert utc(2026, 3, 8, 7, 0) in fired
    assert utc(2026, 3, 7, 7, 30) in fired  # 02:30 EST
    assert utc(2026, 3, 9, 6, 30) in fired  # 02:30 EDT
    # Fall back (2026-11-01): 02:30 EST happens once.
    assert [t for t in fired if t.astimezone(local).date() == datetime(2026, 11, 1).date()] == [
        utc(2026, 11, 1, 7, 30)
    ]


def test_spring_forward_gap_fires_once_at_the_first_valid_minute():
    assert next_after(parse("0 2 * * *"), utc(2026, 3, 8), NEW_YORK) == utc(2026, 3, 8, 7)
    # An hourly cron does not fire 03:00 twice (once for 02:00, once for itself).
    assert ticks("0 * * * *", utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 9), NEW_YORK) == [
        utc(2026, 3, 8, 6),  # 01:00 EST
        utc(2026, 3, 8, 7),  # 02:00 does not exist: 03:00 EDT
        utc(2026, 3, 8, 8),  # 04:00 EDT
        utc(2026, 3, 8, 9),  # 05:00 EDT
    ]


def test_every_minute_cron_crosses_the_gap_without_a_null():
    fired = ticks("* * * * *", utc(2026, 3, 8, 6, 58), utc(2026, 3, 8, 7, 2), NEW_YORK)
    assert fired == [utc(2026, 3, 8, 6, 59), utc(2026, 3, 8, 7), utc(2026, 3, 8, 7, 1), utc(2026, 3, 8, 7, 2)]


def test_hourly_around_fall_back_fires_the_repeated_hour_once():
    fired = ticks("0 * * * *", utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 8), NEW_YORK)
    assert fired == [
        utc(2026, 11, 1, 5),  # 01:00 EDT, the first occurrence
        utc(2026, 11, 1, 7),  # 02:00 EST; 01:00 EST (06:00Z) is the repeat and is skipped
        utc(2026, 11, 1, 8),
    ]


def test_repeated_time_fires_its_first_occurrence():
    assert next_after(parse("30 1 * * *"), utc(2026, 11, 1), NEW_YORK) == utc(2026, 11, 1, 5, 30)
    assert next_after(parse("30 1 * * *"), utc(2026, 11, 1, 5, 30), NEW_YORK) == utc(2026, 11, 2, 6, 30)


def test_a_cursor_inside_the_repeat_does_not_fire_the_hour_again():
    # 06:10Z is 01:10 EST, the second 01:10; every remaining minute of the repeat already fired.
    assert next_after(parse("* * * * *"), utc(2026, 11, 1, 6, 10), NEW_YORK) == utc(2026, 11, 1, 7)


def test_every_minute_never_fires_a_wall_clock_minute_twice_over_fall_back():
    local = ZoneInfo(NEW_YORK)
    fired = ticks("* * * * *", utc(2026, 11, 1, 4), utc(2026, 11, 1, 8), NEW_YORK)
    walls = [t.astimezone(local).replace(tzinfo=None) for t in fired]
    assert len(walls) == len(set(walls))
    assert len(fired) == 3 * 60  # 00:01 .. 03:00 local, the repeated hour once


def test_berlin_daily_0230_on_both_change_days():
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; 2026-10-25: 03:00 CEST falls back to 02:00 CET.
    assert next_after(parse("30 2 * * *"), utc(2026, 3, 28, 12), BERLIN) == utc(2026, 3, 29, 1)
    assert next_after(parse("30 2 * * *"), utc(2026, 10, 24, 12), BERLIN) == utc(2026, 10, 25, 0, 30)
    assert next_after(parse("30 2 * * *"), utc(2026, 10, 25, 0, 30), BERLIN) == utc(2026, 10, 26, 1, 30)


def test_berlin_nightly_report_at_0200_fires_every_local_day_of_2026():
    local = ZoneInfo(BERLIN)
    fired = ticks("0 2 * * *", datetime(2026, 1, 1, tzinfo=local), datetime(2027, 1, 1, tzinfo=local), BERLIN)
    assert len(fired) == 365
    assert utc(2026, 3, 29, 1) in fired  # 02:00 does not exist: 03:00 CEST
    assert utc(2026, 10, 25, 0) in fired  # 02:00 CEST, the first of the two
    assert utc(2026, 10, 25, 1) not in fired  # 02:00 CET, the repeat


def test_berlin_weekly_uses_local_days():
    # Monday 00:30 Berlin is Sunday 23:30Z in winter.
    assert next_after(parse("30 0 * * 1"), T0, BERLIN) == utc(2026, 1, 4, 23, 30)


def test_unknown_zone_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="Unresolvable time-zone id 'Mars/Olympus_Mons'"):
        next_after(parse("* * * * *"), T0, "Mars/Olympus_Mons")
    with pytest.raises(ValueError, match="Unresolvable time-zone id ''"):
        resolve_zone("")
    with pytest.raises(ValueError, match=r"Unresolvable time-zone id '\.\./etc/passwd'"):
        resolve_zone("../etc/passwd")


def test_zone_none_is_utc():
    assert next_after(parse("0 2 * * *"), T0, None) == utc(2026, 1, 1, 2)
