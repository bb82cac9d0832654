"""Settings obey the same rules as code: queue names, schedule ids and crons that fire
(``conf.py`` applies ``core/validation.py`` and ``core.planner.require_schedulable``)."""

from __future__ import annotations

import pytest

from backwave_django import checks


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"QUEUES": {"bad queue": {"concurrency_limit": 1}}},
            "QUEUES key 'bad queue' is not a valid queue name: a queue name is 1 to 128 characters",
        ),
        (
            {"SCHEDULES": {"nightly report": {"job": "test.echo", "cron": "0 2 * * *"}}},
            "SCHEDULES key 'nightly report' is not a valid schedule id: a schedule id is 1 to 128",
        ),
        (
            {"SCHEDULES": {"nightly": {"job": "test.echo", "cron": "0 0 30 2 *"}}},
            "'0 0 30 2 *' never fires: February has no 30th",
        ),
        (
            {"SCHEDULES": {"nightly": {"job": "test.echo", "cron": "0 2 * * *", "queue": "a,b"}}},
            "SCHEDULES['nightly']['queue'] 'a,b' is not a valid queue name",
        ),
    ],
)
def test_settings_that_break_a_name_rule_or_never_fire_are_check_errors(backwave_settings, values, message):
    backwave_settings(**values)
    errors = checks.check_settings()
    assert {m.id for m in errors} == {"backwave.E001"}
    assert any(message in m.msg for m in errors), [m.msg for m in errors]
