"""The plain-English cron gloss shown in the console: common shapes glossed, the rest left raw."""

import pytest

from backwave_django.core.cron_gloss import describe


@pytest.mark.parametrize(
    ("cron", "gloss"),
    [
        ("* * * * *", "Every minute"),
        ("*/5 * * * *", "Every 5 minutes"),
        ("0 * * * *", "Every hour"),
        ("0 */3 * * *", "Every 3 hours"),
        ("15 * * * *", "At minute 15 of every hour"),
        ("0 2 * * *", "Daily at 02:00"),
        ("30 9 * * 1-5", "Weekdays at 09:30"),
        ("0 8 * * 1", "Weekly on Monday at 08:00"),
        ("0 8 * * 7", "Weekly on Sunday at 08:00"),
        ("0 0 1 * *", "Monthly on day 1 at 00:00"),
        ("0 0 0 23 * *", "Monthly on day 23 at 00:00"),
        ("0 30 9 * * 1-5", "Weekdays at 09:30"),
        ("05 02 * * *", "Daily at 02:05"),
    ],
)
def test_common_shapes_get_a_gloss(cron, gloss):
    assert describe(cron) == gloss


@pytest.mark.parametrize(
    "cron",
    [
        "30 0 2 * * *",  # a non-zero seconds field
        "0 2 * 1 *",  # a month restriction
        "0 8 1-5 * *",  # a day-of-month range
        "0 8,20 * * *",  # a list
        "0 8 1 * 1",  # both day fields restricted (OR semantics): too subtle for a sentence
        "10 */2 * * *",  # every other hour at a minute
        "0 2 * * 6,0",  # a weekday list
        "not a cron",
        "61 * * * *",
        "",
    ],
)
def test_anything_else_falls_back_to_the_raw_expression(cron):
    assert describe(cron) == cron
