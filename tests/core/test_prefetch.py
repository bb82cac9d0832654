"""The default prefetch for short jobs (core/prefetch.py): it grows from its base towards twice
the concurrency as far as the last prefetched job's expected wait allows."""

import pytest

from backwave_django.core.prefetch import PREFETCH_WAIT_SECONDS, RUN_TIME_WEIGHT, RunTimes, grown_prefetch


@pytest.mark.parametrize(
    ("mean", "expected"),
    [
        (None, 20),  # nothing finished yet: the base
        (0.0, 40),
        (0.00003, 40),  # a noop: twice the concurrency
        (0.002, 40),  # 40 * 2 ms / 20 threads = 4 ms of wait
        (0.007, 28),  # 28 * 7 ms / 20 = 9.8 ms: as many as fit
        (0.010, 20),  # 20 fit: the base
        (0.5, 20),  # long jobs: never below the base
    ],
)
def test_the_prefetch_fits_the_wait_between_its_base_and_twice_the_concurrency(
    mean: float | None, expected: int
) -> None:
    assert PREFETCH_WAIT_SECONDS == 0.01
    assert grown_prefetch(20, 20, mean) == expected


def test_a_base_already_at_twice_the_concurrency_stays() -> None:
    assert grown_prefetch(20, 10, 0.0) == 20
    assert grown_prefetch(2, 1, 0.0) == 2


def test_run_times_keep_a_weighted_mean_starting_from_the_first() -> None:
    times = RunTimes()
    assert times.mean is None
    times.add(1.0)
    assert times.mean == 1.0
    times.add(3.0)
    assert times.mean == pytest.approx(1.0 + RUN_TIME_WEIGHT * 2.0)
    for _ in range(200):
        times.add(0.001)
    assert times.mean == pytest.approx(0.001, abs=1e-4)  # the 1.1 s weighs 0.95 ** 200 by now
