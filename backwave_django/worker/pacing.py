"""When the pump claims next.

A claim costs a transaction whatever its size, so the pump claims in batches: at once when a
good batch of slots is free, when nothing runs, or when a hint arrived (a job was enqueued, or
maintenance minted some); a partial batch after ``CLAIM_LINGER_SECONDS``, or after the poll
interval when the last claim found nothing (sooner when a flow-control rate limit held due jobs
back: when its window slides, ``store.held_until``). A claim held back by a concurrency limit
waits for the hint a freed slot sends.

A claim that came back short (fewer jobs than it asked for: every queue it names was out of due
jobs) is not repeated at once, only after a change: a hint, an outcome batch landing (it may have
released dependents, and its jobs' leases stop counting against their queues' limits), or the
timer. A job finishing is not such a change: its lease counts until its outcome is written. On
PostgreSQL the store hints every such change itself (an enqueue, a dependent released, an attempt
given back due now, a lease of a limited queue or a flow-control slot freed), so a worker that
hears hints (``waits_for_hints``) waits for one, or the poll interval, after a short claim: at a
trickle it claims once per job, not once more per outcome batch and once more per linger.
Repeating the claim at once found nothing, and it delayed the outcomes of the jobs it had just
handed out by a round trip (docs/worker.md, "What a worker does").

With a batch window (``BATCH_WINDOW``, :attr:`ClaimPacing.window`) claims go at most once per
window, a hint's too: the jobs enqueued meanwhile share one claim, for up to a window of latency;
and a finished job's outcome waits up to the window for others to share its write, even when
nothing else runs (:attr:`ClaimPacing.outcome_linger`; docs/worker.md, "Trading latency for fewer
transactions").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..conf import BackWaveSettings

#: How long free slots short of a good batch wait before they are claimed anyway.
CLAIM_LINGER_SECONDS = 0.020
#: The longest a finished job's outcome waits in the buffer for others to share its write while
#: other jobs run (a lone job's is written at once), without a batch window.
OUTCOME_LINGER_SECONDS = 0.005


class Listening(Protocol):
    """What the pacing reads of the hint listener."""

    hearing: bool


class ClaimPacing:
    """The pump's claim timing. Times are ``time.monotonic()`` seconds."""

    def __init__(self, poll_interval: float, window: float = 0.0) -> None:
        self.poll_interval = poll_interval
        #: The batch window: the least time from one claim to the next (0: none).
        self.window = window
        #: The last :meth:`due` would have claimed but for the window (:meth:`wake_at` wakes at its end).
        self.cooling = False
        self.last_at = 0.0
        self.last_empty = False
        #: The last claim found fewer jobs than it asked for, and nothing has changed since.
        self.last_short = False
        #: A hint arrived (or maintenance minted jobs) since the last claim was sent.
        self.hinted = False
        #: When a rate limit holding back due jobs admits one again (the last claim found nothing).
        self.opens_at: float | None = None
        #: The last claim may have come a moment before a window slid (see :meth:`answered`).
        self.early = False
        #: The worker's hint listener (``worker/hints.py``), once it runs: while it hears the hints
        #: the store sends for every change that makes a job claimable, and no rate limit (which no
        #: hint announces) is declared, a short claim waits for a hint or the poll interval, not
        #: for an outcome batch or a linger (:attr:`waits_for_hints`).
        self.listener: Listening | None = None
        #: Whether a flow-control rate limit is declared (set by the pump at registration).
        self.rates_declared = False

    @classmethod
    def for_settings(cls, settings: BackWaveSettings) -> ClaimPacing:
        """The pacing of ``POLL_INTERVAL`` and ``BATCH_WINDOW``."""
        return cls(settings.poll_interval.total_seconds(), settings.batch_window.total_seconds())

    @property
    def outcome_linger(self) -> float:
        """The longest a finished job's outcome waits for others to share its write: the batch
        window, lone or not, when one is set; else :data:`OUTCOME_LINGER_SECONDS`, and only while
        other jobs run."""
        return max(OUTCOME_LINGER_SECONDS, self.window)

    def sending(self, now: float) -> None:
        """A claim is about to be sent."""
        self.hinted = False
        self.last_at = now
        self.last_empty = self.last_short = False  # until it answers (a claim that fails may retry)

    def answered(self, got: int, asked: int, opens_at: float | None = None) -> None:
        """The claim found ``got`` of ``asked``; ``opens_at``: when a rate limit that holds due
        jobs back admits one again (the claim found nothing), or None."""
        self.last_empty = got == 0
        self.last_short = got < asked
        # With rate limits declared, a claim that found nothing when no bucket was rate-held by the
        # look that followed it may have come a moment early: a window slid in between (no hint
        # announces that). Claim again at once, and only once, rather than at the poll interval.
        self.early = got == 0 and opens_at is None and self.rates_declared and not self.early
        self.opens_at = self.last_at if self.early else opens_at

    def changed(self) -> None:
        """An outcome batch landed: the next claim goes at once (unless the store's hints announce
        what the batch made claimable: :attr:`waits_for_hints`)."""
        if not self.waits_for_hints:
            self.last_short = False

    @property
    def waits_for_hints(self) -> bool:
        """See :attr:`listener`."""
        return self.listener is not None and self.listener.hearing and not self.rates_declared

    def due(self, *, free: int, batch: int, running: bool, now: float) -> bool:
        """Whether to claim ``free`` leases now, ``batch`` being a good batch's size."""
        self.cooling = False
        if free <= 0:
            return False
        wanted = self.hinted or (not self.last_short and (not running or free >= batch))
        if not wanted and now < self.next_partial():
            return False
        if now < self.last_at + self.window:
            self.cooling = True
            return False
        return True

    def wake_at(self, running: bool) -> float | None:
        """When the sleeping pump wakes to claim by itself: a partial batch's time while jobs run,
        and, running or not, the moment a rate limit that held the last claim back admits a job
        again (:attr:`opens_at`), or the end of the batch window that held the last claim back
        (:attr:`cooling`); None: at the poll interval, or at a hint."""
        if self.cooling:
            return self.last_at + self.window
        return self.next_partial() if running or self.opens_at is not None else None

    def next_partial(self) -> float:
        """When a partial batch is claimed anyway."""
        if not self.last_empty and not (self.last_short and self.waits_for_hints):
            return self.last_at + CLAIM_LINGER_SECONDS
        polled = self.last_at + self.poll_interval
        return polled if self.opens_at is None else min(polled, self.opens_at)
