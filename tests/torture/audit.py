"""The torture auditor: pure checks of an end state, its transition log and the client journals.

Nothing here touches a database or a clock, so every oracle can be pinned by a unit test on a
hand-built log (``test_audit.py``). The runner turns the database into a :class:`Snapshot` and the
journals into a list of events, and calls :func:`audit`.

The transition log is the main evidence. A lease is the interval between a claim entry
(``Scheduled → Leased``, actor = the worker id) and the job's next entry; its ``id`` (the global
insertion order of log entries) is what orders leases against each other (see
:func:`check_concurrency_limit` for why that order is sound).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# JobState values (persisted integers; the auditor stays free of Django imports on purpose).
SCHEDULED, AWAITING_PARENT, LEASED, SUCCEEDED, CANCELLED, DEAD_LETTERED, QUARANTINED = range(7)
TERMINAL = frozenset({SUCCEEDED, CANCELLED, DEAD_LETTERED, QUARANTINED})
LIVE = frozenset({SCHEDULED, AWAITING_PARENT, LEASED})
STATE_NAMES = ("Scheduled", "AwaitingParent", "Leased", "Succeeded", "Cancelled", "DeadLettered", "Quarantined")
ON_SUCCESS, ON_ANY_TERMINAL = 0, 1

#: The legal initial states and the 11 legal edges of the state machine (docs/store.md, "Legal
#: transitions"; heartbeats write no entry).
LEGAL_INITIAL = frozenset({SCHEDULED, AWAITING_PARENT, CANCELLED})
LEGAL_EDGES = frozenset(
    {
        (AWAITING_PARENT, SCHEDULED),
        (AWAITING_PARENT, CANCELLED),
        (SCHEDULED, LEASED),
        (SCHEDULED, CANCELLED),
        (LEASED, SUCCEEDED),
        (LEASED, SCHEDULED),
        (LEASED, DEAD_LETTERED),
        (LEASED, CANCELLED),
        (LEASED, QUARANTINED),
        (DEAD_LETTERED, SCHEDULED),
        (QUARANTINED, SCHEDULED),
    }
)
REQUEUE_EDGES = frozenset({(DEAD_LETTERED, SCHEDULED), (QUARANTINED, SCHEDULED)})

LEASE_EXPIRY_ACTOR = "lease-expiry"
ENQUEUE_ACTOR = "enqueue"
CASCADE_PREFIX = "cascade:"
OPERATOR_CANCEL_CAUSE = "operator-cancel"
#: Operator actors used by the torture clients start with this; stray (fence-pressure) reports
#: and heartbeats use worker ids starting with STRAY_PREFIX.
OPERATOR_PREFIX = "torture-op"
STRAY_PREFIX = "stray:"


def state_name(state: int | None) -> str:
    return "(none)" if state is None else STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else str(state)


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition-log entry. ``id`` is its global insertion position."""

    id: int
    ordinal: int
    state: int
    attempt: int
    actor: str
    recorded_at: float
    #: Whether the entry carries failure detail (a failed attempt).
    failed: bool = False
    #: Its place in the observers' delivery order; None while unnumbered.
    position: int | None = None


@dataclass(frozen=True, slots=True)
class JobRow:
    job_id: str
    wire_name: str
    queue: str
    state: int
    attempt: int
    lease_owner: str | None
    lease_expiry: float | None
    terminal_at: float | None
    terminal_cause: str | None
    mode: int
    #: The row's stored ceiling (grown by one per snooze or graceful release); None: the config's.
    max_attempts: int | None = None
    #: Flow control: the stored partition and buckets (``((limit name, bucket), ...)``).
    partition: str | None = None
    limit_keys: tuple[tuple[str, str], ...] = ()


@dataclass
class Snapshot:
    """The store's end state: rows, each job's log (by ordinal), raw edge and tag rows."""

    jobs: dict[str, JobRow]
    transitions: dict[str, list[Transition]]
    #: (parent job id, child job id) per JobDependency row.
    edges: list[tuple[str, str]] = field(default_factory=list)
    #: (job id, key, value) per JobTag row.
    tags: list[tuple[str, str, str]] = field(default_factory=list)
    #: Observer id → its cursor and the positions it dead-lettered.
    observers: dict[str, ObserverEnd] = field(default_factory=dict)
    #: (limit name, bucket, job id) per concurrency slot in use (LimitLease row).
    limit_leases: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ObserverEnd:
    """An observer's durable state at the end: its cursor and its dead-lettered positions."""

    cursor: int
    dead_letters: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Violation:
    oracle: str
    detail: str
    job: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AuditConfig:
    max_attempts: int
    governed_queue: str
    #: Wire names designated unroutable: their jobs, and only theirs, end Quarantined.
    unroutable_wires: frozenset[str] = frozenset()
    #: How long a worker may take between reading the clock for a claim and the claim reading the
    #: queue's settings (SIGSTOP pauses included); widens the window of possibly-in-force limits.
    claim_skew: float = 15.0


class _Journal:
    """The merged client journals, indexed for the checks."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        self.ok_enqueues: Counter[str] = Counter()
        self.attempted: set[str] = set()
        self.enqueue_info: dict[str, dict[str, Any]] = {}
        self.cancels: dict[str, set[str]] = defaultdict(set)  # job -> actors that may have acted
        self.cancel_requests: set[str] = set()  # jobs a cancel may have reached while Leased
        self.requeues: dict[str, set[str]] = defaultdict(set)
        self.limits: list[dict[str, Any]] = []
        self.executions: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        for event in events:
            self.events.append(event)
            op = event.get("op")
            job = event.get("job")
            result = event.get("result")
            if op == "enqueue" and isinstance(job, str):
                self.attempted.add(job)
                if result == "Ok":
                    self.ok_enqueues[job] += 1
                # The parents and mode stored with this id: the accepted enqueue's, else an
                # uncertain one's (a call cut off by a fault may have committed).
                if result == "Ok":
                    self.enqueue_info[job] = event
                elif result == "uncertain":
                    self.enqueue_info.setdefault(job, event)
            elif op == "cancel" and isinstance(job, str):
                if result in ("CancelledImmediately", "CancellationRequested", "uncertain"):
                    self.cancels[job].add(str(event.get("actor")))
                if result in ("CancellationRequested", "uncertain"):
                    self.cancel_requests.add(job)
            elif op == "requeue" and isinstance(job, str):
                if result in ("Requeued", "uncertain"):
                    self.requeues[job].add(str(event.get("actor")))
            elif op == "limit":
                self.limits.append(event)
            elif op == "exec":
                self.executions.append(event)


def _edges(log: Sequence[Transition]) -> Iterable[tuple[Transition | None, Transition]]:
    """Consecutive pairs of a job's log; a gap in ordinals (aged-out entries) breaks the chain."""
    previous: Transition | None = None
    for entry in log:
        if previous is not None and entry.ordinal != previous.ordinal + 1:
            previous = None
            continue
        yield previous, entry
        previous = entry


def check_log(
    job_id: str, log: Sequence[Transition], config: AuditConfig, ceiling: int | None = None
) -> list[Violation]:
    """LegalInitialState, LegalTransition, AttemptMonotonic, AttemptCeiling, OutcomeProvenance and
    EffectOnce for one job's log. ``ceiling`` is the job's stored ceiling (the config's by default)."""
    found: list[Violation] = []
    limit = config.max_attempts if ceiling is None else ceiling
    if not log:
        return [Violation("MissingLog", "job has no transition-log entries", job_id)]
    first = log[0]
    if first.ordinal == 0 and first.state not in LEGAL_INITIAL:
        found.append(
            Violation("LegalInitialState", f"first logged state is {state_name(first.state)}", job_id)
        )
    if first.ordinal == 0 and first.attempt != 0:
        found.append(Violation("AttemptMonotonic", f"initial attempt is {first.attempt}", job_id))
    life = 0
    claims: Counter[tuple[int, int]] = Counter()
    outcomes: Counter[tuple[int, int]] = Counter()
    for previous, entry in _edges(log):
        if entry.attempt > limit:
            found.append(
                Violation(
                    "AttemptCeiling",
                    f"ordinal {entry.ordinal} has attempt {entry.attempt} > {limit}",
                    job_id,
                )
            )
        if previous is None:
            if entry.ordinal != 0:
                life += 1  # after a gap the life is unknown: start a fresh one
            continue
        edge = (previous.state, entry.state)
        where = f"ordinal {previous.ordinal}->{entry.ordinal}"
        if edge not in LEGAL_EDGES:
            found.append(
                Violation(
                    "LegalTransition",
                    f"{where}: {state_name(previous.state)} -> {state_name(entry.state)} "
                    f"(actor {entry.actor})",
                    job_id,
                )
            )
            continue
        if edge in REQUEUE_EDGES:
            life += 1
            if entry.attempt != 0:
                found.append(Violation("AttemptMonotonic", f"{where}: requeue left attempt {entry.attempt}", job_id))
            continue
        if edge == (SCHEDULED, LEASED):
            if entry.attempt != previous.attempt + 1:
                found.append(
                    Violation(
                        "AttemptMonotonic",
                        f"{where}: claim moved attempt {previous.attempt} -> {entry.attempt}",
                        job_id,
                    )
                )
            claims[(life, entry.attempt)] += 1
            if claims[(life, entry.attempt)] > 1:
                found.append(
                    Violation(
                        "NoDoubleExecution",
                        f"{where}: attempt {entry.attempt} handed out twice in one life",
                        job_id,
                    )
                )
            continue
        if entry.attempt != previous.attempt:
            found.append(
                Violation(
                    "AttemptMonotonic",
                    f"{where}: {state_name(previous.state)} -> {state_name(entry.state)} changed attempt "
                    f"{previous.attempt} -> {entry.attempt}",
                    job_id,
                )
            )
        if previous.state == LEASED:
            key = (life, previous.attempt)
            outcomes[key] += 1
            if outcomes[key] > 1:
                found.append(
                    Violation("EffectOnce", f"{where}: second applied outcome for attempt {previous.attempt}", job_id)
                )
            if entry.actor not in (previous.actor, LEASE_EXPIRY_ACTOR):
                found.append(
                    Violation(
                        "OutcomeProvenance",
                        f"{where}: outcome by {entry.actor!r} while the lease of attempt "
                        f"{previous.attempt} belonged to {previous.actor!r}",
                        job_id,
                    )
                )
    return found


def check_row(row: JobRow, log: Sequence[Transition], config: AuditConfig) -> list[Violation]:
    """TerminalStable, TerminalTimestamp, LeaseOwnerPresent/Cleared and AttemptCeiling on the row."""
    found: list[Violation] = []
    job = row.job_id
    if log:
        last = log[-1]
        if last.state != row.state:
            found.append(
                Violation(
                    "TerminalStable",
                    f"row is {state_name(row.state)} but the last logged state is {state_name(last.state)}",
                    job,
                )
            )
        if last.attempt != row.attempt:
            found.append(
                Violation("TerminalStable", f"row attempt {row.attempt} != last logged attempt {last.attempt}", job)
            )
    limit = config.max_attempts if row.max_attempts is None else row.max_attempts
    if row.attempt > limit:
        found.append(Violation("AttemptCeiling", f"row attempt {row.attempt} > {limit}", job))
    given_back = sum(
        1
        for previous, entry in _edges(log)
        if previous is not None
        and (previous.state, entry.state) == (LEASED, SCHEDULED)
        and entry.actor != LEASE_EXPIRY_ACTOR
        and not entry.failed
    )
    complete = bool(log) and log[0].ordinal == 0  # no entries aged out
    if row.max_attempts is not None and complete and row.max_attempts > config.max_attempts + given_back:
        found.append(
                Violation(
                    "CeilingGrowth",
                    f"ceiling {row.max_attempts} > declared {config.max_attempts} + {given_back} attempt(s) "
                    "given back (snoozes and releases)",
                    job,
                )
            )
    terminal = row.state in TERMINAL
    if terminal != (row.terminal_at is not None):
        found.append(
            Violation(
                "TerminalTimestamp",
                f"{state_name(row.state)} row has terminal_at={row.terminal_at!r}",
                job,
            )
        )
    leased = row.state == LEASED
    if leased and (row.lease_owner is None or row.lease_expiry is None):
        found.append(Violation("LeaseOwnerPresent", "Leased row without lease owner or expiry", job))
    if not leased and (row.lease_owner is not None or row.lease_expiry is not None):
        found.append(
            Violation("LeaseOwnerCleared", f"{state_name(row.state)} row still has lease owner {row.lease_owner!r}", job)
        )
    return found


def _logged_states(snapshot: Snapshot, job: str) -> set[int]:
    return {t.state for t in snapshot.transitions.get(job, [])}


def check_provenance(snapshot: Snapshot, journal: _Journal, config: AuditConfig) -> list[Violation]:
    """CancelProvenance, RequeueProvenance and QuarantineOnlyUnroutable."""
    found: list[Violation] = []
    unroutable = {job for job, row in snapshot.jobs.items() if row.wire_name in config.unroutable_wires}
    for job, log in snapshot.transitions.items():
        row = snapshot.jobs.get(job)
        info = journal.enqueue_info.get(job, {})
        parents = [str(p) for p in info.get("parents", [])]
        mode = int(info.get("mode", ON_SUCCESS))
        failed_parent = any(
            _logged_states(snapshot, p) & {CANCELLED, DEAD_LETTERED, QUARANTINED} for p in parents
        )
        for previous, entry in _edges(log):
            if entry.state == CANCELLED:
                where = f"ordinal {entry.ordinal}"
                if entry.actor == ENQUEUE_ACTOR or entry.actor.startswith(CASCADE_PREFIX):
                    parent = entry.actor[len(CASCADE_PREFIX) :] if entry.actor != ENQUEUE_ACTOR else None
                    if mode != ON_SUCCESS or not failed_parent or (parent is not None and parent not in parents):
                        found.append(
                            Violation(
                                "CancelProvenance",
                                f"{where}: cancelled by {entry.actor!r} without a failed ON_SUCCESS parent "
                                f"(mode {mode}, parents {parents})",
                                job,
                            )
                        )
                elif previous is not None and previous.state == LEASED:
                    if job not in journal.cancel_requests:
                        found.append(
                            Violation(
                                "CancelProvenance",
                                f"{where}: running job recorded Cancelled by {entry.actor!r} with no cancel request",
                                job,
                            )
                        )
                elif entry.actor not in journal.cancels.get(job, set()):
                    found.append(
                        Violation("CancelProvenance", f"{where}: cancelled by unjournaled actor {entry.actor!r}", job)
                    )
            requeued = previous is not None and (previous.state, entry.state) in REQUEUE_EDGES
            if requeued and entry.actor not in journal.requeues.get(job, set()):
                found.append(
                    Violation(
                        "RequeueProvenance",
                        f"ordinal {entry.ordinal}: requeued by unjournaled actor {entry.actor!r}",
                        job,
                    )
                )
            if entry.state == QUARANTINED and job not in unroutable:
                found.append(
                    Violation("QuarantineOnlyUnroutable", f"ordinal {entry.ordinal}: routable job quarantined", job)
                )
            if entry.state == SUCCEEDED and job in unroutable:
                found.append(Violation("QuarantineOnlyUnroutable", "unroutable job Succeeded", job))
        cooperative = row is not None and row.state == CANCELLED and previous_is_cooperative(log)
        if cooperative and row is not None and row.terminal_cause != OPERATOR_CANCEL_CAUSE:
            found.append(
                Violation(
                    "CancelProvenance",
                    f"cooperative cancel recorded cause {row.terminal_cause!r}, not {OPERATOR_CANCEL_CAUSE!r}",
                    job,
                )
            )
    for event in journal.executions:
        if event.get("job") in unroutable:
            found.append(Violation("QuarantineNotExecuted", "a handler ran for an unroutable job", str(event["job"])))
    return found


def previous_is_cooperative(log: Sequence[Transition]) -> bool:
    """Whether the job's last entry is Cancelled straight out of Leased (a cooperative cancel)."""
    return len(log) >= 2 and log[-1].state == CANCELLED and log[-2].state == LEASED and (
        log[-1].ordinal == log[-2].ordinal + 1
    )


def check_graph(snapshot: Snapshot) -> list[Violation]:
    """DuplicateTagRows, DuplicateEdgeRows, DanglingEdge and NoAwaitingParentOrphan."""
    found: list[Violation] = []
    for (job, key, value), n in Counter(snapshot.tags).items():
        if n > 1:
            found.append(Violation("DuplicateTagRows", f"tag {key!r}:{value!r} stored {n} times", job))
    for (parent, child), n in Counter(snapshot.edges).items():
        if n > 1:
            found.append(Violation("DuplicateEdgeRows", f"edge from {parent} stored {n} times", child))
    gating: dict[str, list[str]] = defaultdict(list)
    for parent, child in snapshot.edges:
        gating[child].append(parent)
        parent_row = snapshot.jobs.get(parent)
        if parent_row is not None and parent_row.state in TERMINAL:
            # A parent's edges are deleted in the transaction that ends it (its latch resolves);
            # requeue revives only jobs whose edges went when they first ended.
            found.append(
                Violation("DanglingEdge", f"edge from {state_name(parent_row.state)} parent {parent} still stored", child)
            )
    for job, row in snapshot.jobs.items():
        if row.state != AWAITING_PARENT:
            continue
        parents = gating.get(job, [])
        live = [p for p in parents if p in snapshot.jobs and snapshot.jobs[p].state not in TERMINAL]
        if not live:
            found.append(Violation("NoAwaitingParentOrphan", f"Awaiting Parent with gating parents {parents}", job))
    return found


def check_enqueues(snapshot: Snapshot, journal: _Journal) -> list[Violation]:
    """DuplicateEnqueueAccepted, EnqueueDurability and NoPhantomJobs."""
    found: list[Violation] = []
    for job, n in journal.ok_enqueues.items():
        if n > 1:
            found.append(Violation("DuplicateEnqueueAccepted", f"{n} enqueues of one id were accepted", job))
        if job not in snapshot.jobs:
            found.append(Violation("EnqueueDurability", "accepted enqueue is missing from the store", job))
    for job in snapshot.jobs:
        if job not in journal.attempted:
            found.append(Violation("NoPhantomJobs", "stored job traces back to no enqueue", job))
    return found


def check_journal_findings(journal: _Journal) -> list[Violation]:
    """Stray fence probes that got through, and client-side exceptions that are not database faults."""
    found: list[Violation] = []
    for event in journal.events:
        op = event.get("op")
        if op == "stray_report" and event.get("result") == "Applied":
            found.append(Violation("StrayFenced", "a report from a worker holding no lease applied", event.get("job")))
        elif op == "stray_heartbeat" and event.get("renewed"):
            found.append(Violation("StrayFenced", "a heartbeat from a worker holding no lease renewed it", event.get("job")))
        elif op == "client_error":
            found.append(Violation("ClientException", str(event.get("error")), event.get("job")))
    return found


def check_stray_actors(snapshot: Snapshot) -> list[Violation]:
    return [
        Violation("StrayFenced", f"ordinal {t.ordinal} written by stray actor {t.actor!r}", job)
        for job, log in snapshot.transitions.items()
        for t in log
        if t.actor.startswith(STRAY_PREFIX)
    ]


class _LimitHistory:
    """The journaled limit changes of the governed queue, indexed for :meth:`candidates`."""

    def __init__(self, limits: list[dict[str, Any]]) -> None:
        self.by_start = sorted(limits, key=lambda e: float(e["t0"]))
        self.starts = [float(e["t0"]) for e in self.by_start]
        self.max_span = max((float(e["t1"]) - float(e["t0"]) for e in limits), default=0.0)
        # For "the latest start of a change certainly committed before t": ok changes by end time,
        # with the running maximum of their start times.
        done = sorted((float(e["t1"]), float(e["t0"])) for e in limits if e["ok"])
        self.ends = [t1 for t1, _ in done]
        self.latest_start: list[float] = []
        best = float("-inf")
        for _, t0 in done:
            best = max(best, t0)
            self.latest_start.append(best)

    def candidates(self, t: float, skew: float) -> list[int | None]:
        """Limits that may have been in force for a claim whose worker read the clock at ``t``.

        A change's commit lies in its journaled window [t0, t1]; the claim read the queue settings
        at some instant in [t, t + skew]. A change is ruled out only when another one certainly
        committed after it and before ``t`` (it started after the first ended, and ended before
        ``t``). A failed call (``ok`` false) may or may not have committed: it is a candidate but
        never rules anything out.
        """
        index = bisect.bisect_left(self.ends, t)
        boundary = self.latest_start[index - 1] if index else float("-inf")
        low = bisect.bisect_left(self.starts, boundary - self.max_span)
        high = bisect.bisect_right(self.starts, t + skew)
        return [c["limit"] for c in self.by_start[low:high] if float(c["t1"]) >= boundary]


def check_concurrency_limit(snapshot: Snapshot, journal: _Journal, config: AuditConfig) -> list[Violation]:
    """No claim on the governed queue made its Leased count exceed the limit in force (I3).

    Claims of a limited queue take turns on the queue's settings row and insert their log entries
    after counting, so for a claim entry B (id Y) every lease A with ``claim id < Y < end id`` was
    committed and still Leased when B counted (an end entry with a larger id was written after B's
    count). The audit's count is therefore never above what the store saw: a breach is real.
    """
    if not journal.limits:
        return []
    # A sweep over log ids: +1 at each claim entry of the governed queue, -1 at the entry ending it.
    marks: list[tuple[int, int, str]] = []  # (id, +1 claim / -1 end, job)
    claimed_at: dict[int, float] = {}
    for job, row in snapshot.jobs.items():
        if row.queue != config.governed_queue:
            continue
        log = snapshot.transitions.get(job, [])
        for index, entry in enumerate(log):
            if entry.state != LEASED:
                continue
            marks.append((entry.id, 1, job))
            claimed_at[entry.id] = entry.recorded_at
            if index + 1 < len(log):
                marks.append((log[index + 1].id, -1, job))
    marks.sort()
    history = _LimitHistory(journal.limits)
    found: list[Violation] = []
    live = 0
    for entry_id, step, job in marks:
        live += step
        if step < 0:
            continue
        candidates = history.candidates(claimed_at[entry_id], config.claim_skew)
        if not candidates or any(c is None for c in candidates):
            continue
        allowed = max(c for c in candidates if c is not None)
        if live > allowed:
            found.append(
                Violation(
                    "ConcurrencyLimit",
                    f"claim entry {entry_id} made {live} leases live on {config.governed_queue!r}; "
                    f"the limit in force was at most {allowed}",
                    job,
                )
            )
    return found


def audit(snapshot: Snapshot, events: Iterable[dict[str, Any]], config: AuditConfig) -> list[Violation]:
    """Every oracle over the end state and the merged journals; an empty list means clean."""
    journal = _Journal(events)
    found: list[Violation] = []
    for job, row in snapshot.jobs.items():
        log = snapshot.transitions.get(job, [])
        found += check_log(job, log, config, row.max_attempts)
        found += check_row(row, log, config)
    for job in snapshot.transitions.keys() - snapshot.jobs.keys():
        found.append(Violation("OrphanTransitions", "log entries without a job row", job))
    found += check_provenance(snapshot, journal, config)
    found += check_graph(snapshot)
    found += check_enqueues(snapshot, journal)
    found += check_journal_findings(journal)
    found += check_stray_actors(snapshot)
    found += check_concurrency_limit(snapshot, journal, config)
    return found


def check_drained(snapshot: Snapshot) -> list[Violation]:
    """DrainLiveness: after the drain every job is terminal."""
    return [
        Violation("DrainLiveness", f"still {state_name(row.state)} after the drain bound", job)
        for job, row in snapshot.jobs.items()
        if row.state in LIVE
    ]


def check_stable(before: Snapshot, after: Snapshot) -> list[Violation]:
    """TerminalStable over time: a drained terminal row does not change while workers keep running."""
    found: list[Violation] = []
    for job, row in before.jobs.items():
        if row.state not in TERMINAL:
            continue
        later = after.jobs.get(job)
        if later != row:
            found.append(Violation("TerminalStable", f"terminal row changed after the drain: {row} -> {later}", job))
    return found
