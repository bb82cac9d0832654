"""How to test your jobs: the shop's jobs, run by backwave_django's test harness.

The ``backwave`` fixture (turned on in ``conftest.py``) is a ``BackWaveHarness``: a virtual clock
that ``.enqueue()`` and ``operator`` actions read, and a pump that runs due jobs on the test's own
thread, with the worker's own rules, against the real store in the test database. Moving the clock
runs every retry, released dependent and schedule tick on the way, at its own instant. See
docs/testing.md for the whole API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from backwave_django import (
    CancelResult,
    JobState,
    NewJob,
    WorkflowEnqueueResult,
    WorkflowError,
    WorkflowStatus,
    operator,
    store,
)
from backwave_django.testing import WORKER_ID, BackWaveHarness, JobSnapshot, RunSummary

from shop import jobs, providers


@pytest.fixture(autouse=True)
def _without_the_minutely_exchange_rate_sync(settings: Any) -> None:
    """Drop the project's every-minute ``exchange-rates`` schedule for these tests.

    The harness applies ``BACKWAVE["SCHEDULES"]`` when it starts, as a worker does, so with it every
    virtual minute would mint (and run) a sync: a retry test that crosses a minute boundary would
    run one more job than it enqueued, and a test that moves three days ahead would run 4,320.
    Autouse fixtures are set up first, so this runs before the ``backwave`` fixture starts.
    """
    settings.BACKWAVE = {
        **settings.BACKWAVE,
        "SCHEDULES": {
            schedule_id: options
            for schedule_id, options in settings.BACKWAVE["SCHEDULES"].items()
            if schedule_id != "exchange-rates"
        },
    }


def history(job: JobSnapshot) -> list[tuple[str, str]]:
    """A job's transition log as (state, actor) pairs, oldest first."""
    return [(entry.state.label, entry.actor) for entry in job.transitions]


# --- A flaky external call, retried with backoff ------------------------------------------------


class ScriptedProvider(providers.ExchangeRateProvider):
    """Times out on the first ``failures`` calls, then answers 1.0842; records when it was called."""

    def __init__(self, failures: int, clock: Callable[[], datetime]) -> None:
        super().__init__(failure_rate=0.0)
        self.failures = failures
        self.clock = clock
        self.called_at: list[datetime] = []

    def latest(self, currency: str) -> float:
        self.called_at.append(self.clock())
        if len(self.called_at) <= self.failures:
            raise providers.ProviderUnavailable(
                f"rates.example.com did not answer for {currency} within 10 s"
            )
        return 1.0842


def test_a_flaky_exchange_rate_call_is_retried_after_2_4_and_8_seconds_then_succeeds(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(failures=3, clock=lambda: backwave.now)
    monkeypatch.setattr(providers, "exchange_rates", provider)
    start = backwave.now
    job_id = jobs.sync_exchange_rates.enqueue("EUR").job_id

    # The first attempt runs at once and fails; the retry waits for the clock.
    assert backwave.run_until_idle() == RunSummary(retried=1)
    assert backwave.job(job_id).due_time == start + timedelta(seconds=2)

    # 13 seconds on: the retries at +2 s and +6 s have failed too; the one at +14 s is still due.
    assert backwave.advance(timedelta(seconds=13)) == RunSummary(retried=2)
    assert backwave.job(job_id).state == JobState.SCHEDULED

    assert backwave.advance(timedelta(seconds=1)) == RunSummary(succeeded=1)
    job = backwave.job(job_id)
    assert (job.state, job.attempt) == (JobState.SUCCEEDED, 4)
    assert job.output == {"currency": "EUR", "rate": 1.0842}
    assert provider.called_at == [start + timedelta(seconds=s) for s in (0, 2, 6, 14)]
    assert len(job.failure_details) == 3
    assert "rates.example.com did not answer for EUR within 10 s" in job.failure_details[0]


def test_an_exchange_rate_call_that_keeps_failing_dead_letters_on_the_sixth_failure(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        providers, "exchange_rates", ScriptedProvider(failures=100, clock=lambda: backwave.now)
    )
    job_id = jobs.sync_exchange_rates.enqueue("EUR").job_id

    # drain() jumps the clock from retry to retry until every job is terminal.
    assert backwave.drain() == RunSummary(retried=5, dead_lettered=1)
    job = backwave.job(job_id)
    assert (job.state, job.attempt) == (JobState.DEAD_LETTERED, 6)
    assert job.terminal_cause == "rates.example.com did not answer for EUR within 10 s"
    assert job.terminal_at == job.enqueued_at + timedelta(seconds=2 + 4 + 8 + 16 + 32)


def test_a_dead_lettered_job_raises_an_alert(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The observer, called with the job's Dead-Lettered transition as a worker would call it."""
    monkeypatch.setattr(
        providers, "exchange_rates", ScriptedProvider(failures=100, clock=lambda: backwave.now)
    )
    job_id = jobs.sync_exchange_rates.enqueue("EUR").job_id
    backwave.drain()
    dead = [entry for entry in backwave.job(job_id).transitions if entry.state is JobState.DEAD_LETTERED]
    event = store.transition_event(job_id, dead[0].ordinal)
    assert event is not None
    with caplog.at_level("ERROR", logger="shop.alerts"):
        jobs.alert_dead_letters(event)
    assert f"ALERT: sync-exchange-rates job {job_id} dead-lettered on attempt 6" in caplog.text


# --- Fan-out / fan-in: a report built from parallel parts ---------------------------------------

#: (orders, revenue in cents) per region, in place of the orders table.
FIGURES = {
    "north": (10, 1_000),
    "south": (20, 2_000),
    "east": (30, 3_000),
    "west": (40, 4_000),
    "online": (50, 5_000),
}


def test_the_sales_summary_runs_after_every_region_and_adds_up_their_outputs(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(providers, "regional_figures", lambda region, day: FIGURES[region])
    summary_id = jobs.start_sales_report("2026-11-29")
    assert backwave.job(summary_id).state == JobState.AWAITING_PARENT

    # One call runs the five parts and then the summary they released.
    assert backwave.run_until_idle() == RunSummary(succeeded=6)
    summary = backwave.job(summary_id)
    assert summary.output == {
        "day": "2026-11-29",
        "orders": 150,
        "revenue_cents": 15_000,
        "by_region": {"north": 1_000, "south": 2_000, "east": 3_000, "west": 4_000, "online": 5_000},
    }
    # Released by the last part to succeed (the parts run in enqueue order), not before.
    [online] = backwave.assert_enqueued(jobs.regional_sales, args=["online", "2026-11-29"], count=1)
    assert history(summary) == [
        ("Awaiting Parent", "enqueue"),
        ("Scheduled", f"cascade:{online.job_id}"),
        ("Leased", WORKER_ID),
        ("Succeeded", WORKER_ID),
    ]


def test_starting_the_same_days_report_twice_stores_it_once(backwave: BackWaveHarness) -> None:
    assert jobs.start_sales_report("2026-11-29") == jobs.start_sales_report("2026-11-29")
    backwave.assert_enqueued(jobs.regional_sales, count=len(jobs.REGIONS))
    backwave.assert_enqueued(jobs.sales_summary, count=1)


def test_a_region_that_never_answers_cancels_the_summary_without_running_it(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def east_replica_down(region: str, day: str) -> tuple[int, int]:
        if region == "east":
            raise ConnectionError("could not reach replica db-east-2")
        return FIGURES[region]

    monkeypatch.setattr(providers, "regional_figures", east_replica_down)
    summary_id = jobs.start_sales_report("2026-11-28")

    # The default retry policy: ten attempts, so the tenth failure dead-letters.
    assert backwave.drain() == RunSummary(succeeded=4, retried=9, dead_lettered=1)
    summary = backwave.job(summary_id)
    assert summary.state == JobState.CANCELLED
    assert summary.terminal_cause == "parent-failure:DeadLettered"
    assert summary.attempt == 0  # never ran


# --- A workflow: a supplier's catalogue import ----------------------------------------------------


def test_a_catalogue_import_runs_as_one_workflow_parents_first(backwave: BackWaveHarness) -> None:
    workflow_id = jobs.start_catalogue_import("acme-tools", "2026-11-29")
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING
    graph = store.workflow_graph(workflow_id)
    assert graph is not None
    assert graph.name == "catalogue import acme-tools 2026-11-29"
    assert len(graph.members) == 4
    assert len(graph.edges) == 4  # fetch → products, fetch → images, both → publish

    assert backwave.run_until_idle() == RunSummary(succeeded=4)
    assert store.workflow_status(workflow_id) is WorkflowStatus.SUCCEEDED
    [products] = backwave.assert_enqueued(jobs.import_products, count=1)
    listed = providers.supplier_feed("acme-tools", "2026-11-29")
    assert products.output == {"supplier": "acme-tools", "imported": listed}
    [publish] = backwave.assert_enqueued(jobs.publish_catalogue, count=1)
    assert publish.output == {"supplier": "acme-tools", "day": "2026-11-29", "published": True}


def test_a_supplier_is_imported_once_a_day(backwave: BackWaveHarness) -> None:
    jobs.start_catalogue_import("acme-tools", "2026-11-29")
    with pytest.raises(WorkflowError) as refused:
        jobs.start_catalogue_import("acme-tools", "2026-11-29")
    assert refused.value.result is WorkflowEnqueueResult.DUPLICATE_WORKFLOW
    backwave.assert_enqueued(jobs.fetch_supplier_feed, count=1)
    jobs.start_catalogue_import("acme-tools", "2026-11-30")  # another day, another workflow
    backwave.assert_enqueued(jobs.fetch_supplier_feed, count=2)


def test_images_that_never_resize_fail_the_workflow_and_cancel_publishing(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(supplier: str, day: str) -> int:
        raise PermissionError("images.example: 403 Forbidden")

    workflow_id = jobs.start_catalogue_import("nordic-home", "2026-11-29")
    monkeypatch.setattr(providers, "supplier_feed", lambda supplier, day: 12)
    backwave.run_next()  # the feed
    monkeypatch.setattr(providers, "supplier_feed", refused)
    assert backwave.drain() == RunSummary(succeeded=1, retried=1, dead_lettered=1)
    [publish] = backwave.assert_enqueued(jobs.publish_catalogue, count=1)
    assert (publish.state, publish.terminal_cause) == (JobState.CANCELLED, "parent-failure:DeadLettered")
    assert store.workflow_status(workflow_id) is WorkflowStatus.FAILED


# --- The nightly report, scheduled at 02:00 Europe/Berlin ---------------------------------------


def test_yesterday_is_the_day_before_in_berlin_not_in_utc() -> None:
    assert jobs.resolve_day("yesterday", now=datetime(2026, 11, 29, 23, 30, tzinfo=UTC)) == "2026-11-29"
    assert jobs.resolve_day("yesterday", now=datetime(2026, 11, 29, 22, 30, tzinfo=UTC)) == "2026-11-28"


class TestTheNightlyReportSchedule:
    """The ``nightly-sales-report`` schedule from ``settings.BACKWAVE``, around a daylight-saving change."""

    @pytest.fixture
    def backwave_start(self) -> datetime:
        # For the tests in this class: Friday noon, before Europe's clocks go forward on Sunday.
        return datetime(2026, 3, 27, 12, tzinfo=UTC)

    @pytest.fixture(autouse=True)
    def _yesterday_on_the_virtual_clock(
        self, backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The job works out "yesterday" from the real clock; only backwave's clock is virtual,
        so make the job read the harness's."""
        resolve_day = jobs.resolve_day
        monkeypatch.setattr(jobs, "resolve_day", lambda day: resolve_day(day, now=backwave.now))

    def test_it_runs_at_two_in_the_morning_berlin_time_on_both_sides_of_the_change(
        self, backwave: BackWaveHarness
    ) -> None:
        backwave.advance(timedelta(days=3))

        runs = backwave.jobs(jobs.nightly_sales_report, schedule_id="nightly-sales-report")
        assert [run.due_time for run in runs] == [
            datetime(2026, 3, 28, 1, tzinfo=UTC),  # 02:00 CET
            datetime(2026, 3, 29, 1, tzinfo=UTC),  # 02:00 does not exist that night: 03:00 CEST
            datetime(2026, 3, 30, 0, tzinfo=UTC),  # 02:00 CEST
        ]
        assert {run.state for run in runs} == {JobState.SUCCEEDED}
        assert [run.output["day"] for run in runs] == ["2026-03-27", "2026-03-28", "2026-03-29"]

    def test_each_night_builds_yesterdays_full_report(self, backwave: BackWaveHarness) -> None:
        assert backwave.advance(timedelta(days=1)) == RunSummary(
            minted=1, succeeded=1 + len(jobs.REGIONS) + 1
        )
        [summary] = backwave.assert_enqueued(jobs.sales_summary, count=1, state=JobState.SUCCEEDED)
        assert summary.output["day"] == "2026-03-27"
        assert summary.output["orders"] == sum(
            providers.regional_figures(region, "2026-03-27")[0] for region in jobs.REGIONS
        )


# --- A long job that an operator can cancel -----------------------------------------------------


def test_a_running_index_rebuild_stops_at_the_next_batch_when_an_operator_cancels_it(
    backwave: BackWaveHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = jobs.rebuild_search_index.enqueue(batches=240, seconds_per_batch=0.5).job_id
    pauses: list[float] = []

    def pause_between_batches(seconds: float) -> None:
        """Stands in for the handler's ``time.sleep``: no waiting, and after the third batch
        Alice cancels the job in the admin while it runs."""
        pauses.append(seconds)
        if len(pauses) == 3:
            assert operator.cancel(job_id, actor="alice") is CancelResult.CANCELLATION_REQUESTED

    monkeypatch.setattr(jobs, "time", SimpleNamespace(sleep=pause_between_batches))

    # The harness delivers the cancel request whenever the handler checks ``ctx.cancel_requested``.
    assert backwave.run_until_idle() == RunSummary(cancelled=1)
    job = backwave.job(job_id)
    assert job.state == JobState.CANCELLED
    assert job.terminal_cause == "operator-cancel"
    assert ("stopped-at-batch", "3") in job.tags
    assert pauses == [0.5, 0.5, 0.5]


def test_an_index_rebuild_cancelled_before_it_starts_never_runs(backwave: BackWaveHarness) -> None:
    job_id = jobs.rebuild_search_index.enqueue().job_id
    assert operator.cancel(job_id, actor="alice") is CancelResult.CANCELLED_IMMEDIATELY
    assert backwave.run_until_idle() == RunSummary()
    job = backwave.job(job_id)
    # Cancelled before it ran, the cause is who cancelled it ("operator-cancel" is for a running job).
    assert (job.state, job.terminal_cause, job.attempt) == (JobState.CANCELLED, "alice", 0)


# --- A job whose signature changed ---------------------------------------------------------------


def test_a_welcome_email_stored_before_the_rename_is_quarantined_with_the_reason(
    backwave: BackWaveHarness,
) -> None:
    # What version 1 stored: ``send_welcome_email.enqueue(user_id=17)``, before the rename.
    legacy = NewJob(
        job_id=uuid.uuid4(),
        wire_name="send-welcome-email",
        payload=jobs.LEGACY_WELCOME_PAYLOAD,
        queue="emails",
        due_time=backwave.now,
    )
    store.enqueue(legacy, now=backwave.now)
    current_id = jobs.send_welcome_email.enqueue(17, locale="de").job_id

    assert backwave.run_until_idle() == RunSummary(quarantined=1, succeeded=1)
    quarantined = backwave.job(legacy.job_id)
    assert quarantined.state == JobState.QUARANTINED
    assert quarantined.terminal_cause == (
        "payload for wire name 'send-welcome-email' no longer decodes: missing a required argument: 'customer_id'"
    )
    assert backwave.job(current_id).output == {"sent_to": 17, "template": "welcome.de"}


def test_the_old_signature_is_refused_at_enqueue(backwave: BackWaveHarness) -> None:
    with pytest.raises(TypeError, match="send-welcome-email"):
        jobs.send_welcome_email.enqueue(user_id=17)  # type: ignore[call-arg]
    backwave.assert_no_jobs()


# --- An order: a charge, and a confirmation that depends on it -----------------------------------


def test_an_order_confirmation_waits_for_the_charge_and_is_sent_after_it(backwave: BackWaveHarness) -> None:
    charge_id = jobs.place_order("SO-1", 2_450)
    [confirmation] = backwave.assert_enqueued(
        jobs.send_order_confirmation, args=["SO-1"], count=1, state=JobState.AWAITING_PARENT
    )

    # The charge runs, releases the confirmation, and the confirmation (an async handler) runs too.
    assert backwave.run_until_idle() == RunSummary(succeeded=2)
    assert backwave.job(charge_id).output == {
        "charge_id": jobs.charge_order.call("SO-1", 2_450)["charge_id"],
        "amount_cents": 2_450,
    }
    confirmation = backwave.job(confirmation.job_id)
    assert confirmation.output == {"message_id": "<SO-1@shop.example>"}
    assert history(confirmation) == [
        ("Awaiting Parent", "enqueue"),
        ("Scheduled", f"cascade:{charge_id}"),
        ("Leased", WORKER_ID),
        ("Succeeded", WORKER_ID),
    ]


def test_placing_the_same_order_twice_stores_its_jobs_once(backwave: BackWaveHarness) -> None:
    assert jobs.place_order("SO-2", 999) == jobs.place_order("SO-2", 999)
    backwave.assert_enqueued(jobs.charge_order, args=["SO-2", 999], count=1)
    backwave.assert_enqueued(jobs.send_order_confirmation, args=["SO-2"], count=1)


def test_a_charge_that_keeps_failing_dead_letters_after_three_attempts_and_cancels_the_confirmation(
    backwave: BackWaveHarness,
) -> None:
    start = backwave.now
    charge_id = jobs.place_order("SO-3", 0)

    assert backwave.drain() == RunSummary(retried=2, dead_lettered=1)
    charge = backwave.job(charge_id)
    assert charge.state == JobState.DEAD_LETTERED
    assert charge.terminal_cause == "order SO-3: nothing to charge (0 cents)"
    # Attempts at once, then after the 10 s and 60 s backoffs.
    assert [t.recorded_at for t in charge.transitions if t.state == JobState.LEASED] == [
        start,
        start + timedelta(seconds=10),
        start + timedelta(seconds=70),
    ]
    [confirmation] = backwave.jobs(jobs.send_order_confirmation)
    assert (confirmation.state, confirmation.terminal_cause) == (
        JobState.CANCELLED,
        "parent-failure:DeadLettered",
    )
    assert confirmation.attempt == 0  # never sent
