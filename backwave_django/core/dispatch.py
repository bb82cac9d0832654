"""Which queues a worker claims from, and in what order: strict priority or smooth weighted round-robin.

Pure: the pump asks for a plan of claim batches and reports what it issued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .validation import validate_queue_name


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """One claim call: ``queues`` in priority order, at most ``max_jobs``."""

    queues: tuple[str, ...]
    max_jobs: int


class StrictDispatch:
    """Queues in the declared order; a later queue gets slots only when earlier ones are empty."""

    def __init__(self, queues: Sequence[str]) -> None:
        if not queues:
            raise ValueError("Strict dispatch needs at least one queue.")
        self.queues = tuple(dict.fromkeys(validate_queue_name(q, "queues[]") for q in queues))

    def plan(self, slots: int) -> list[ClaimBatch]:
        return [ClaimBatch(self.queues, slots)] if slots > 0 else []

    def issued(self, batch: ClaimBatch) -> None:
        """Strict dispatch keeps no state."""


class WeightedDispatch:
    """Smooth weighted round-robin: 6:3:1 serves ``a,b,a,a,b,a,c,a,b,a`` per ten slots.

    Each step every credit grows by its weight (capped at the total), the highest credit wins
    (ties: the earlier queue), and the winner pays the total. A pass is planned on a scratch copy
    of the credits; credit advances only for batches the pump actually issues, so a batch that
    is never sent strands no credit.
    """

    def __init__(self, weights: Sequence[tuple[str, int]]) -> None:
        if not weights or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for _, w in weights):
            raise ValueError("Weighted dispatch needs at least one queue, all weights >= 1.")
        names = [validate_queue_name(q, "queues[]") for q, _ in weights]
        if len(set(names)) != len(names):
            raise ValueError("Weighted dispatch lists a queue twice.")
        self.queues = tuple(names)
        self.weights = tuple(w for _, w in weights)
        self.total = sum(self.weights)
        self.credits = [0] * len(self.weights)

    def _step(self, credits: list[int]) -> int:
        for i, weight in enumerate(self.weights):
            credits[i] = min(credits[i] + weight, self.total)
        winner = max(range(len(credits)), key=lambda i: (credits[i], -i))
        credits[winner] -= self.total
        return winner

    def sequence(self, steps: int) -> list[str]:
        """The next ``steps`` winners, without advancing the real credits (for docs and tests)."""
        scratch = list(self.credits)
        return [self.queues[self._step(scratch)] for _ in range(steps)]

    def plan(self, slots: int) -> list[ClaimBatch]:
        """Per-queue claim batches for ``slots``: each queue first, then the others as fallback."""
        scratch = list(self.credits)
        counts = [0] * len(self.queues)
        for _ in range(max(slots, 0)):
            counts[self._step(scratch)] += 1
        batches = []
        for i, count in enumerate(counts):
            if count:
                fallback = tuple(q for j, q in enumerate(self.queues) if j != i)
                batches.append(ClaimBatch((self.queues[i], *fallback), count))
        return batches

    def issued(self, batch: ClaimBatch) -> None:
        """Advance the real credits for a batch the pump sent, by its slots."""
        for _ in range(batch.max_jobs):
            self._step(self.credits)


Dispatch = StrictDispatch | WeightedDispatch


def parse_weights(text: str) -> list[tuple[str, int]]:
    """``"a=6,b=3,c=1"`` → ``[("a", 6), ("b", 3), ("c", 1)]``; raises ``ValueError`` with the bad part."""
    result = []
    for part in (p.strip() for p in text.split(",")):
        name, sep, weight = part.partition("=")
        if not sep or not name.strip() or not weight.strip().isdigit():
            raise ValueError(f"expected queue=weight (a positive integer), got {part!r}")
        result.append((name.strip(), int(weight)))
    return result
