"""The observer oracles: every matching log entry delivered at least once, in order, none skipped.

Pure, like :mod:`.audit`: it reads a :class:`~.audit.Snapshot` (each entry's ``position``, each
observer's cursor and dead letters) and the ``observed`` journal lines the torture observers write
(``jobs.py``), one per delivery attempt, with the wall-clock time ``t`` of the call.

- ``ObserverNumbering``: after the catch-up every entry has a position, and no position is given
  twice.
- ``ObserverPayload``: a delivery describes the entry at its position (job, ordinal, state), and
  that entry matches the observer's subscription.
- ``ObserverSkipped``: every matching entry at or below the cursor was delivered (a call returned)
  or is a dead letter.
- ``ObserverLiveness``: the cursor has passed every matching entry (the runner waits for it).
- ``ObserverOrder``: the first successful deliveries, in time order, go up in position. Later
  repeats (at-least-once, after a crash) are allowed anywhere.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from .audit import Snapshot, Transition, Violation, state_name

#: At most this many violations of one kind are listed per observer (the rest are counted).
LISTED = 5


def check_observers(
    snapshot: Snapshot,
    events: Iterable[dict[str, Any]],
    subscriptions: Mapping[str, tuple[frozenset[int], str | None]],
) -> list[Violation]:
    found, entries = _numbering(snapshot)
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event.get("op") == "observed":
            records[str(event.get("observer"))].append(event)
    for observer_id, (states, wire) in subscriptions.items():
        matching = {
            position
            for position, (job, entry) in entries.items()
            if entry.state in states and (wire is None or _wire(snapshot, job) == wire)
        }
        found += _check_one(observer_id, snapshot, entries, matching, records.get(observer_id, []))
    return found


def _numbering(snapshot: Snapshot) -> tuple[list[Violation], dict[int, tuple[str, Transition]]]:
    found: list[Violation] = []
    entries: dict[int, tuple[str, Transition]] = {}
    for job, log in snapshot.transitions.items():
        for entry in log:
            if entry.position is None:
                found.append(
                    Violation(
                        "ObserverNumbering",
                        f"entry #{entry.ordinal} ({state_name(entry.state)}) unnumbered",
                        job,
                    )
                )
            elif entry.position in entries:
                found.append(Violation("ObserverNumbering", f"position {entry.position} given twice", job))
            else:
                entries[entry.position] = (job, entry)
    return found, entries


def _wire(snapshot: Snapshot, job: str) -> str | None:
    row = snapshot.jobs.get(job)
    return None if row is None else row.wire_name


def _check_one(
    observer_id: str,
    snapshot: Snapshot,
    entries: dict[int, tuple[str, Transition]],
    matching: set[int],
    records: list[dict[str, Any]],
) -> list[Violation]:
    found: list[Violation] = []
    for record in records:
        position = int(record["position"])
        entry = entries.get(position)
        if entry is None:
            continue  # aged out of the job's log since (the per-job history cap)
        job, transition = entry
        described = (record.get("job"), record.get("ordinal"), record.get("state"))
        if described != (job, transition.ordinal, transition.state):
            found.append(
                Violation(
                    "ObserverPayload",
                    f"{observer_id} got {described} for position {position}, which is "
                    f"#{transition.ordinal} {state_name(transition.state)}",
                    job,
                )
            )
        elif position not in matching:
            found.append(
                Violation("ObserverPayload", f"{observer_id} got unsubscribed position {position}", job)
            )
    end = snapshot.observers.get(observer_id)
    cursor = -1 if end is None else end.cursor
    dead = frozenset() if end is None else end.dead_letters
    delivered = {int(r["position"]) for r in records if r.get("did") == "ok"}
    skipped = sorted(p for p in matching if p <= cursor and p not in delivered and p not in dead)
    for position in skipped[:LISTED]:
        job, transition = entries[position]
        found.append(
            Violation(
                "ObserverSkipped",
                f"{observer_id} passed position {position} (#{transition.ordinal} "
                f"{state_name(transition.state)}) without delivering it"
                + (f" ({len(skipped)} such entries)" if len(skipped) > 1 else ""),
                job,
            )
        )
    behind = sorted(p for p in matching if p > cursor)
    if behind:
        found.append(
            Violation(
                "ObserverLiveness",
                f"{observer_id}'s cursor {cursor} is behind {len(behind)} matching entries (first {behind[0]})",
            )
        )
    first: dict[int, float] = {}
    for record in sorted(records, key=lambda r: float(r.get("t", 0))):
        if record.get("did") == "ok":
            first.setdefault(int(record["position"]), float(record["t"]))
    in_time_order = sorted(first, key=lambda p: first[p])
    backwards = [(a, b) for a, b in itertools.pairwise(in_time_order) if b < a]
    for earlier, later in backwards[:LISTED]:
        found.append(
            Violation(
                "ObserverOrder",
                f"{observer_id} first delivered position {later} after position {earlier}"
                + (f" ({len(backwards)} such pairs)" if len(backwards) > 1 else ""),
            )
        )
    return found
