"""When the pump claims next (``worker/pacing.py``): pure timing rules, no database."""

from __future__ import annotations

import pytest

from backwave_django.worker.pacing import CLAIM_LINGER_SECONDS, ClaimPacing

POLL = 1.0
BATCH = 15  # a good batch of free slots


@pytest.fixture
def pacing() -> ClaimPacing:
    return ClaimPacing(POLL)


class _Hearing:
    hearing = True


def _claimed(pacing: ClaimPacing, got: int, asked: int, at: float = 100.0) -> None:
    pacing.sending(at)
    pacing.answered(got, asked)


def test_after_a_full_claim_a_free_batch_is_claimed_at_once(pacing: ClaimPacing) -> None:
    _claimed(pacing, got=32, asked=32)
    assert pacing.due(free=BATCH, batch=BATCH, running=True, now=100.0)
    assert not pacing.due(free=BATCH - 1, batch=BATCH, running=True, now=100.0)  # a partial batch lingers


@pytest.mark.parametrize("running", [True, False])
def test_after_a_short_claim_the_next_waits_for_a_change(pacing: ClaimPacing, running: bool) -> None:
    _claimed(pacing, got=1, asked=32)
    assert not pacing.due(free=39, batch=BATCH, running=running, now=100.001)
    pacing.changed()  # an outcome batch landed
    assert pacing.due(free=39, batch=BATCH, running=running, now=100.001)


def test_a_hint_claims_even_after_a_short_claim(pacing: ClaimPacing) -> None:
    _claimed(pacing, got=3, asked=20)
    pacing.hinted = True
    assert pacing.due(free=39, batch=BATCH, running=True, now=100.0)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0)
    pacing.sending(100.5)
    assert not pacing.hinted  # the claim sent answers the hint


def test_nothing_running_claims_at_once_unless_the_last_claim_came_back_short(pacing: ClaimPacing) -> None:
    assert pacing.due(free=1, batch=BATCH, running=False, now=0.0)  # the first claim
    _claimed(pacing, got=32, asked=32)
    assert pacing.due(free=1, batch=BATCH, running=False, now=100.0)


def test_a_claim_that_fails_leaves_the_next_free_to_go_at_once(pacing: ClaimPacing) -> None:
    _claimed(pacing, got=0, asked=32)
    pacing.sending(200.0)  # and it raised: no answer
    assert pacing.due(free=39, batch=BATCH, running=False, now=200.0)


def test_a_short_claim_is_repeated_after_the_linger_and_an_empty_one_after_the_poll_interval(
    pacing: ClaimPacing,
) -> None:
    _claimed(pacing, got=2, asked=32)
    assert pacing.next_partial() == pytest.approx(100.0 + CLAIM_LINGER_SECONDS)
    assert not pacing.due(free=39, batch=BATCH, running=True, now=100.0 + CLAIM_LINGER_SECONDS / 2)
    assert pacing.due(free=39, batch=BATCH, running=True, now=100.0 + CLAIM_LINGER_SECONDS)
    _claimed(pacing, got=0, asked=32)
    assert pacing.next_partial() == pytest.approx(100.0 + POLL)
    assert not pacing.due(free=39, batch=BATCH, running=True, now=100.5)
    assert pacing.due(free=39, batch=BATCH, running=True, now=101.0)


def test_no_free_slot_never_claims(pacing: ClaimPacing) -> None:
    pacing.hinted = True
    assert not pacing.due(free=0, batch=BATCH, running=False, now=1e9)


def test_an_empty_claim_held_back_by_a_rate_limit_claims_again_when_its_window_slides(
    pacing: ClaimPacing,
) -> None:
    pacing.sending(100.0)
    pacing.answered(0, 32, opens_at=100.25)
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.2)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.25)
    # ... and the pump, with nothing running, sleeps until then (not for the poll interval).
    assert pacing.wake_at(False) == pytest.approx(100.25)


def test_an_idle_pump_sleeps_until_the_poll_or_a_hint_and_a_busy_one_until_a_partial_batch(
    pacing: ClaimPacing,
) -> None:
    pacing.sending(100.0)
    pacing.answered(3, 32)
    assert pacing.wake_at(False) is None
    assert pacing.wake_at(True) == pytest.approx(100.0 + CLAIM_LINGER_SECONDS)


def test_a_claim_a_moment_before_the_window_opened_is_sent_again_at_once_and_only_once(
    pacing: ClaimPacing,
) -> None:
    pacing.rates_declared = True
    pacing.sending(100.0)
    pacing.answered(0, 32, opens_at=100.25)
    pacing.sending(100.25)
    pacing.answered(0, 32)  # found nothing, and by the look after it nothing was held any longer
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.26)
    assert pacing.wake_at(False) == pytest.approx(100.25)
    pacing.sending(100.26)
    pacing.answered(0, 32)  # still nothing: held by something else than a rate (a hint will come)
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.3)
    assert pacing.wake_at(False) is None
    pacing.sending(101.26)
    pacing.answered(0, 32)  # at the poll: found nothing again, so one more at once ...
    assert pacing.due(free=39, batch=BATCH, running=False, now=101.27)
    pacing.sending(101.27)
    pacing.answered(0, 32)  # ... and then only at the next poll
    assert not pacing.due(free=39, batch=BATCH, running=False, now=101.3)
    pacing.rates_declared = False
    pacing.sending(102.27)
    pacing.answered(0, 32)  # without a rate limit, no window slides unannounced: no repeat
    assert not pacing.due(free=39, batch=BATCH, running=False, now=102.3)


def test_a_window_sliding_after_the_poll_interval_waits_for_the_poll_only(pacing: ClaimPacing) -> None:
    pacing.sending(100.0)
    pacing.answered(0, 32, opens_at=105.0)
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.0 + POLL - 0.01)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0 + POLL)


def test_a_claim_that_took_jobs_forgets_the_window(pacing: ClaimPacing) -> None:
    pacing.sending(100.0)
    pacing.answered(0, 32, opens_at=100.25)
    _claimed(pacing, got=0, asked=32, at=101.0)
    assert not pacing.due(free=39, batch=BATCH, running=False, now=101.5)


def test_a_worker_that_hears_hints_waits_for_one_after_a_short_claim(pacing: ClaimPacing) -> None:
    """The store hints what an outcome batch makes claimable, so neither the batch landing nor the
    linger sends a claim after a short one: a hint does, or the poll interval."""
    pacing.listener = _Hearing()
    _claimed(pacing, got=1, asked=32)
    pacing.changed()  # an outcome batch landed
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.0 + CLAIM_LINGER_SECONDS)
    assert pacing.next_partial() == pytest.approx(100.0 + POLL)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0 + POLL)
    pacing.hinted = True
    assert pacing.due(free=39, batch=BATCH, running=True, now=100.0 + CLAIM_LINGER_SECONDS)


def test_a_worker_that_hears_hints_still_lingers_after_a_full_claim(pacing: ClaimPacing) -> None:
    pacing.listener = _Hearing()
    _claimed(pacing, got=32, asked=32)
    assert pacing.next_partial() == pytest.approx(100.0 + CLAIM_LINGER_SECONDS)
    assert pacing.due(free=BATCH, batch=BATCH, running=True, now=100.0)


def test_a_declared_rate_or_a_listener_that_hears_nothing_keeps_the_linger(pacing: ClaimPacing) -> None:
    pacing.listener = _Hearing()
    pacing.rates_declared = True  # no hint announces a rate's window sliding
    _claimed(pacing, got=1, asked=32)
    assert pacing.next_partial() == pytest.approx(100.0 + CLAIM_LINGER_SECONDS)
    pacing.rates_declared = False
    deaf = _Hearing()
    deaf.hearing = False  # connecting, or behind a pooler
    pacing.listener = deaf
    pacing.changed()
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0)


WINDOW = 0.020  # a batch window (``BATCH_WINDOW``)


def test_a_batch_window_holds_a_hinted_claim_until_it_ends_and_wakes_the_pump_then() -> None:
    pacing = ClaimPacing(POLL, WINDOW)
    _claimed(pacing, got=1, asked=32)
    pacing.hinted = True
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.005)
    assert pacing.cooling
    assert pacing.wake_at(running=False) == pytest.approx(100.0 + WINDOW)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0 + WINDOW)
    assert not pacing.cooling


def test_without_a_batch_window_the_same_hint_claims_at_once(pacing: ClaimPacing) -> None:
    _claimed(pacing, got=1, asked=32)
    pacing.hinted = True
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.005)


def test_a_batch_window_holds_an_idle_pump_after_a_full_claim_too() -> None:
    pacing = ClaimPacing(POLL, WINDOW)
    _claimed(pacing, got=32, asked=32)
    assert not pacing.due(free=1, batch=BATCH, running=False, now=100.001)
    assert pacing.wake_at(running=False) == pytest.approx(100.0 + WINDOW)  # not the poll interval


def test_a_batch_window_leaves_a_claim_nothing_asks_for_to_its_usual_time() -> None:
    """Only a claim the pump would send now waits for the window; one that waits anyway (a partial
    batch's linger, the poll after an empty claim) keeps its own time, never an earlier one."""
    pacing = ClaimPacing(POLL, WINDOW)
    _claimed(pacing, got=0, asked=32)
    assert not pacing.due(free=39, batch=BATCH, running=False, now=100.5)
    assert not pacing.cooling
    assert pacing.wake_at(running=False) is None  # the poll interval (or a hint)
    assert pacing.due(free=39, batch=BATCH, running=False, now=100.0 + POLL)


def test_no_free_slot_is_never_cooling() -> None:
    pacing = ClaimPacing(POLL, WINDOW)
    _claimed(pacing, got=1, asked=32)
    pacing.hinted = True
    assert not pacing.due(free=0, batch=BATCH, running=True, now=100.001)
    assert not pacing.cooling


@pytest.mark.parametrize(("window", "linger"), [(0.0, 0.005), (0.002, 0.005), (WINDOW, WINDOW)])
def test_the_outcome_linger_is_the_batch_window_when_longer(window: float, linger: float) -> None:
    assert ClaimPacing(POLL, window).outcome_linger == pytest.approx(linger)
