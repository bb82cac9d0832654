"""Reading the operator's words: job ids, state names, tags, limits.

Each reader takes the text as typed and returns the value, or raises :class:`UsageError` with a
one-line message that names the argument, what was typed and what is expected (exit status 2).
They are checked by the command's handlers rather than as argparse ``type=`` functions, so a
bad value gets that one line, not argparse's usage block.
"""

from __future__ import annotations

import uuid

from ..core import job_filter
from ..core.states import JobState
from ..monitor import MAX_PAGE, HasKey, HasKeyValue, HasLabel, TagPredicate

#: Exit statuses (docs/cli.md): done, refused (not found, not cancellable, …), bad usage or input.
EXIT_DONE, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input from the operator: the message is printed on one line and the exit status is 2."""


def job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise UsageError(
            f"{text!r} is not a job id: expected a UUID such as 3f2b8c1e-6a4d-4f0e-9b1a-2c7d5e8f9a01"
        ) from None


def job_ids(texts: list[str]) -> list[uuid.UUID]:
    """The ids in the order given, each once."""
    return list(dict.fromkeys(job_id(text) for text in texts))


def state_name(state: JobState) -> str:
    """How the CLI writes a state in JSON and reads it back: ``dead_lettered``."""
    return state.name.lower()


def job_state(text: str) -> JobState:
    """A state by name in any case, ``-``, ``_`` or a space between words (``dead-lettered``,
    ``DEAD_LETTERED``, ``Awaiting Parent``), read by the job list's rule (``core/job_filter.py``);
    the CLI takes names only, never the numbers the console's URLs carry."""
    try:
        if text.strip().isdigit():
            raise job_filter.FilterValueError("a state's name")
        return job_filter.read_state(text)
    except job_filter.FilterValueError:
        known = ", ".join(state_name(state) for state in JobState)
        raise UsageError(f"--state {text!r} is not a job state: expected one of {known}") from None


def name(option: str, text: str | None) -> str | None:
    """A queue or a wire name taken literally (``--queue``, ``--wire-name``); empty is refused."""
    if text is None:
        return None
    parameter = job_filter.QUEUE if option == "--queue" else job_filter.WIRE_NAME
    try:
        return job_filter.read_name(text, parameter)
    except job_filter.FilterValueError as error:
        raise UsageError(f"{option} {text!r}: expected {error.expected}") from None


def search_term(text: str | None) -> str | None:
    """``--search``: any text but blank."""
    if text is None:
        return None
    if not text.strip():
        raise UsageError("--search must not be blank: expected an id, a sequence number, key=value or text")
    return text.strip()


def tag_predicate(text: str) -> TagPredicate:
    """``key=value`` (split at the first ``=``), ``key:`` (any value under the key), else a label."""
    key, equals, value = text.partition("=")
    try:
        if equals:
            return HasKeyValue(key, value)
        if text.endswith(":"):
            return HasKey(text[:-1])
        return HasLabel(text)
    except ValueError:
        raise UsageError(
            f"--tag {text!r} is not a tag: expected a label, key: (any value) or key=value, "
            "none of them empty"
        ) from None


def label(text: str) -> HasLabel:
    """``--label``: a label taken literally (it may contain ``=`` or end in ``:``)."""
    if not text:
        raise UsageError("--label must not be empty (tags never have an empty value)")
    return HasLabel(text)


def tag_text(key: str, value: str) -> str:
    """A tag as ``--tag`` spells it: ``vip`` for a label, ``tenant=acme`` for a keyed tag."""
    return f"{key}={value}" if key else value


def page_size(text: str) -> int:
    """``--limit``: a whole number from 1; anything above :data:`MAX_PAGE` reads one full page."""
    number = _whole_number("--limit", text)
    if number < 1:
        raise UsageError(f"--limit must be at least 1 (a page holds at most {MAX_PAGE} jobs), got {text!r}")
    return min(number, MAX_PAGE)


def cursor(text: str) -> int:
    """``--after``: a job's ``sequence`` (the paging cursor)."""
    number = _whole_number("--after", text)
    if number < 0:
        raise UsageError(f"--after takes a job's sequence number (0 or more), got {text!r}")
    return number


def concurrency_limit(text: str) -> int | None:
    """``queues limit Q N|none``: a number of Leased jobs (0 blocks the queue) or ``none`` to clear."""
    if text.strip().lower() == "none":
        return None
    number = _whole_number("the limit", text, expected="a number of jobs (0 or more) or none")
    if number < 0:
        raise UsageError(f"the limit must be a number of jobs (0 or more) or none, got {text!r}")
    return number


def _whole_number(name: str, text: str, *, expected: str = "a whole number") -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{name} must be {expected}, got {text!r}") from None
