"""The example project's settings come from the environment (django-environ)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from django.core import checks

SETTINGS_FILE = Path(__file__).resolve().parents[1] / "demo_site" / "settings.py"


def load_settings(monkeypatch: pytest.MonkeyPatch, **environ: str) -> dict[str, Any]:
    """The settings module's values under ``environ`` (variables not given are unset)."""
    for name in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "TIME_ZONE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


def test_the_database_defaults_to_sqlite_in_the_project_folder_with_immediate_transactions(monkeypatch):
    values = load_settings(monkeypatch)
    database = values["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(database["NAME"]) == SETTINGS_FILE.parents[1] / "db.sqlite3"
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert values["DEBUG"] is False
    assert values["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]


def test_any_sqlite_url_gets_immediate_transactions(monkeypatch):
    values = load_settings(monkeypatch, DATABASE_URL="sqlite:////tmp/elsewhere.sqlite3")
    database = values["DATABASES"]["default"]
    assert database["NAME"] == "/tmp/elsewhere.sqlite3"
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_a_postgres_url_is_used_as_given(monkeypatch):
    values = load_settings(
        monkeypatch,
        DATABASE_URL="postgres://shop:secret@db.internal:5433/shop",
        DEBUG="true",
        SECRET_KEY="from-the-environment",
        ALLOWED_HOSTS="shop.example,www.shop.example",
    )
    database = values["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"], database["USER"]) == (
        "db.internal",
        5433,
        "shop",
        "shop",
    )
    assert "transaction_mode" not in database.get("OPTIONS", {})
    assert values["DEBUG"] is True
    assert values["SECRET_KEY"] == "from-the-environment"
    assert values["ALLOWED_HOSTS"] == ["shop.example", "www.shop.example"]


@pytest.mark.django_db
def test_the_project_passes_backwave_checks_including_the_database_ones():
    messages = checks.run_checks(databases=["default"], include_deployment_checks=False)
    assert [m for m in messages if m.id and m.id.startswith("backwave.")] == []


def test_the_schedules_are_a_nightly_report_in_berlin_time_and_a_minutely_rate_sync():
    from shop.demo import settings_schedule_spec

    nightly = settings_schedule_spec("nightly-sales-report")
    assert (nightly.cron, nightly.time_zone, nightly.queue) == ("0 2 * * *", "Europe/Berlin", "reports")
    rates = settings_schedule_spec("exchange-rates")
    assert (rates.cron, rates.wire_name, rates.queue) == ("* * * * *", "sync-exchange-rates", "integrations")
