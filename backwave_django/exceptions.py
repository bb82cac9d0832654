"""Errors a user can hit; each carries a machine-readable attribute and a message that says what to do."""

from __future__ import annotations

import uuid

from .core.states import EnqueueResult


class EnqueueError(Exception):
    """An enqueue the store refused; ``result`` says which rule it broke."""

    def __init__(self, result: EnqueueResult, message: str) -> None:
        super().__init__(message)
        self.result = result


class OutputTooLarge(ValueError):
    """A Success output above ``MAX_OUTPUT_BYTES``: outputs are rejected, never truncated."""

    def __init__(self, job_id: uuid.UUID, actual_bytes: int, max_output_bytes: int) -> None:
        super().__init__(
            f"output of job {job_id} is {actual_bytes:,} bytes; MAX_OUTPUT_BYTES is "
            f"{max_output_bytes:,} — store the data elsewhere and return a reference instead"
        )
        self.job_id = job_id
        self.actual_bytes = actual_bytes
        self.max_output_bytes = max_output_bytes
