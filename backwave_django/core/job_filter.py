"""The job filter, read exactly or refused: the one rule the console's job list, its actions over
the whole filter and the CLI's ``jobs`` use (``docs/admin.md``, "A filter is exact or refused").

:func:`parse` turns a list's query parameters into a :class:`JobFilter` and the list of what it
could not read (:class:`FilterError`, each naming the parameter and what it expects); a filter
with any error selects no jobs, never all of them. Each parameter has one reader
(:func:`read_state`, :func:`read_priority`, …) which the CLI calls for its options too, so a
value means the same in both. Pure: no ORM, no clock; the monitor and the console apply the
parsed filter.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from urllib.parse import urlencode

from .states import JobState, TerminalStateClass
from .unique import MAX_PRIORITY, MIN_PRIORITY

#: Priority ranges a filter may name instead of one priority: (words, lowest, highest).
PRIORITY_RANGES: dict[str, tuple[str, int, int]] = {
    "above": ("above normal (> 0)", 1, MAX_PRIORITY),
    "normal": ("normal (0)", 0, 0),
    "below": ("below normal (< 0)", MIN_PRIORITY, -1),
}

#: The list's filter parameters, each with what it expects (the messages quote it).
STATE, RETRYING, TERMINAL_CLASS, PRIORITY = "state__exact", "retrying", "terminal_class", "priority"
QUEUE, WIRE_NAME, SCHEDULE, LEASE_OWNER, WORKFLOW = (
    "queue",
    "wire_name",
    "schedule_id",
    "lease_owner",
    "workflow_id",
)
TAG_LABEL, TAG_KEY, TAG_VALUE, SEARCH = "tl", "tk", "tv", "q"
#: Django admin's own parameters the list keeps (ordering, page, show all, popups, facets, the
#: invalid-filter flag) and the tag filter's search box; none of them selects jobs.
ORDER, PAGE, ERROR_FLAG = "o", "p", "e"
ADMIN_PARAMETERS = frozenset(
    {
        ORDER,
        PAGE,
        ERROR_FLAG,
        "all",
        "_popup",
        "_to_field",
        "_source_model",
        "_facets",
        "_changelist_filters",
        "tq",
    }
)
_ORDERING = re.compile(r"-?\d+(\.-?\d+)*")

_STATES = ", ".join(f"{int(state)} ({state.label})" for state in JobState)
_CLASSES = ", ".join(f"{int(state_class)} ({state_class.label})" for state_class in TerminalStateClass)
EXPECTED = {
    STATE: f"a job state: {_STATES}",
    RETRYING: "1 (jobs waiting for a retry)",
    TERMINAL_CLASS: f"a terminal class: {_CLASSES}",
    PRIORITY: f"above, normal, below, or a priority from {MIN_PRIORITY} to {MAX_PRIORITY}",
    QUEUE: "a queue name",
    WIRE_NAME: "a wire name",
    SCHEDULE: "a schedule id",
    LEASE_OWNER: "a worker id",
    WORKFLOW: "a workflow id (a UUID)",
    TAG_LABEL: "a label",
    TAG_KEY: "a tag key",
    TAG_VALUE: "a tag value, with tk (its key) given too",
    ORDER: "a column number to sort by, such as 1 or -1",
    PAGE: "a page number from 1",
}


class FilterValueError(ValueError):
    """A value a reader cannot read; ``expected`` says what it takes."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


@dataclass(frozen=True)
class FilterError:
    """One parameter the filter could not read: its name, the value given, what it expects."""

    parameter: str
    value: str
    expected: str

    @property
    def text(self) -> str:
        """``“priority=abc”: expected above, normal, below, or a priority from -100 to 100``."""
        return f"“{self.parameter}={self.value}”: expected {self.expected}"


# --- Readers, one per kind of value (the CLI's options use them too) -----------------------------


def read_state(text: str) -> JobState:
    """A state by number (``5``) or by name in any case, ``-``/``_``/space between words."""
    value = text.strip()
    if value.isdigit() and int(value) in JobState.values:
        return JobState(int(value))
    name = value.upper().replace("-", "_").replace(" ", "_")
    if name and name in JobState.names:
        return JobState[name]
    raise FilterValueError(EXPECTED[STATE])


def read_retrying(text: str) -> bool:
    if text.strip() == "1":
        return True
    raise FilterValueError(EXPECTED[RETRYING])


def read_terminal_class(text: str) -> TerminalStateClass:
    value = text.strip()
    if value.isdigit() and int(value) in TerminalStateClass.values:
        return TerminalStateClass(int(value))
    raise FilterValueError(EXPECTED[TERMINAL_CLASS])


def read_priority(text: str) -> int | str:
    """One priority (an int in range) or a range's name (``above``, ``normal``, ``below``)."""
    value = text.strip().lower()
    if value in PRIORITY_RANGES:
        return value
    if re.fullmatch(r"[+-]?\d{1,4}", value) and MIN_PRIORITY <= int(value) <= MAX_PRIORITY:
        return int(value)
    raise FilterValueError(EXPECTED[PRIORITY])


def read_name(text: str, parameter: str = QUEUE) -> str:
    """A name taken literally (queue, wire name, schedule, worker, tag part): anything but empty."""
    if not text:
        raise FilterValueError(f"{EXPECTED[parameter]}, not empty")
    return text


def read_uuid(text: str, parameter: str = WORKFLOW) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise FilterValueError(EXPECTED[parameter]) from None


# --- The parsed filter ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a list shows: every field given, ANDed; no field given selects every job."""

    state: JobState | None = None
    retrying: bool = False
    terminal_class: TerminalStateClass | None = None
    queue: str | None = None
    priority: int | str | None = None
    wire_name: str | None = None
    schedule_id: str | None = None
    lease_owner: str | None = None
    workflow_id: uuid.UUID | None = None
    tag_label: str | None = None
    tag_key: str | None = None
    tag_value: str | None = None
    search: str = ""

    @property
    def narrows(self) -> bool:
        """Whether anything narrows the jobs (a whole-filter action needs it to)."""
        return any(getattr(self, spec.name) not in (None, False, "") for spec in fields(self))

    def priority_bounds(self) -> tuple[int, int] | None:
        """The priorities the filter selects, lowest and highest, or None for any."""
        if self.priority is None:
            return None
        if isinstance(self.priority, str):
            _, low, high = PRIORITY_RANGES[self.priority]
            return low, high
        return self.priority, self.priority

    def words(self) -> list[str]:
        """The filter in words, in the list's order: ``state is Scheduled``, ``queue is billing``."""
        said: list[str] = []
        if self.state is not None:
            said.append(f"state is {self.state.label}")
        if self.retrying:
            said.append("waiting for a retry")
        if self.terminal_class is not None:
            said.append(f"terminal class is {self.terminal_class.label}")
        names = (("queue", self.queue), ("wire name", self.wire_name), ("schedule", self.schedule_id))
        said += [f"{what} is {value}" for what, value in names if value is not None]
        if self.priority is not None:
            priority = PRIORITY_RANGES[self.priority][0] if isinstance(self.priority, str) else self.priority
            said.append(f"priority is {priority}")
        if self.lease_owner is not None:
            said.append(f"running on worker {self.lease_owner}")
        if self.workflow_id is not None:
            said.append(f"workflow is {self.workflow_id}")
        if self.tag_label is not None:
            said.append(f"has the label {self.tag_label}")
        elif self.tag_key is not None:
            said.append(
                f"tag {self.tag_key} is {self.tag_value}"
                if self.tag_value
                else f"has a tag under {self.tag_key}"
            )
        if self.search:
            said.append(f"search matches “{self.search}”")
        return said

    def canonical(self) -> str:
        """The filter as one query string, in a fixed order: what a whole-filter action signs."""
        pairs = [
            (STATE, None if self.state is None else str(int(self.state))),
            (RETRYING, "1" if self.retrying else None),
            (TERMINAL_CLASS, None if self.terminal_class is None else str(int(self.terminal_class))),
            (QUEUE, self.queue),
            (PRIORITY, None if self.priority is None else str(self.priority)),
            (WIRE_NAME, self.wire_name),
            (SCHEDULE, self.schedule_id),
            (LEASE_OWNER, self.lease_owner),
            (WORKFLOW, None if self.workflow_id is None else str(self.workflow_id)),
            (TAG_LABEL, self.tag_label),
            (TAG_KEY, self.tag_key),
            (TAG_VALUE, self.tag_value),
            (SEARCH, self.search or None),
        ]
        return urlencode([(name, value) for name, value in pairs if value is not None])


@dataclass(frozen=True)
class ParsedFilter:
    """What :func:`parse` read: the filter, and every parameter it could not read."""

    filter: JobFilter
    errors: tuple[FilterError, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


_READERS: dict[str, tuple[str, Callable[[str], object]]] = {
    STATE: ("state", read_state),
    RETRYING: ("retrying", read_retrying),
    TERMINAL_CLASS: ("terminal_class", read_terminal_class),
    PRIORITY: ("priority", read_priority),
    QUEUE: ("queue", lambda text: read_name(text, QUEUE)),
    WIRE_NAME: ("wire_name", lambda text: read_name(text, WIRE_NAME)),
    SCHEDULE: ("schedule_id", lambda text: read_name(text, SCHEDULE)),
    LEASE_OWNER: ("lease_owner", lambda text: read_name(text, LEASE_OWNER)),
    WORKFLOW: ("workflow_id", lambda text: read_uuid(text, WORKFLOW)),
    TAG_LABEL: ("tag_label", lambda text: read_name(text, TAG_LABEL)),
    TAG_KEY: ("tag_key", lambda text: read_name(text, TAG_KEY)),
    TAG_VALUE: ("tag_value", str),
}


def _known() -> str:
    return ", ".join([*_READERS, SEARCH])


def _admin_error(name: str, value: str) -> FilterError | None:
    """Django admin's own parameters: only the ordering and the page carry a value to check."""
    if name == ORDER and not _ORDERING.fullmatch(value):
        return FilterError(name, value, EXPECTED[ORDER])
    if name == PAGE and not (value.isdigit() and int(value) >= 1):
        return FilterError(name, value, EXPECTED[PAGE])
    if name == ERROR_FLAG:
        return FilterError(name, value, "a filter the list can apply (the previous one could not be)")
    return None


def parse(params: Iterable[tuple[str, Sequence[str]]]) -> ParsedFilter:
    """Read a job list's query parameters (``QueryDict.lists()``): the filter, or what is wrong.

    Every parameter is either read exactly or reported: an unknown name, a value its reader
    refuses, or a parameter given twice with different values.
    """
    found: dict[str, object] = {}
    errors: list[FilterError] = []
    for name, given in params:
        values = list(dict.fromkeys(given))
        if len(values) != 1:
            shown = " & ".join(values)
            errors.append(FilterError(name, shown, "one value (it was given several)"))
            continue
        value = values[0]
        if name in ADMIN_PARAMETERS:
            if (error := _admin_error(name, value)) is not None:
                errors.append(error)
        elif name == SEARCH:
            found["search"] = value.strip()
        elif name in _READERS:
            attribute, reader = _READERS[name]
            try:
                found[attribute] = reader(value)
            except FilterValueError as refused:
                errors.append(FilterError(name, value, refused.expected))
        else:
            errors.append(FilterError(name, value, f"one of the list's filters ({_known()})"))
    if "tag_value" in found and "tag_key" not in found:
        errors.append(FilterError(TAG_VALUE, str(found.pop("tag_value")), EXPECTED[TAG_VALUE]))
    if found.get("tag_value") == "":
        found.pop("tag_value")
    return ParsedFilter(JobFilter(**found), tuple(errors))  # type: ignore[arg-type]
