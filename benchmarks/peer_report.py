"""The side-by-side table of the ``peers`` step (benchmarks/peers.py): one column per queue, the
raw-psycopg figures of the same run where the ``enqueue`` and ``processing`` steps ran, and
backwave_django's figure over each peer's. Django-free, like ``run.py``'s own table code."""

from __future__ import annotations

from typing import Any

#: The peer queues the harness knows (``--peers``); benchmarks/peers.py has a class for each.
PEERS = ("pgqueuer", "procrastinate")
QUEUE_ORDER = ("backwave_django", "pgqueuer", "procrastinate")
SETTING_LABELS = {
    "c10_p1": "1 process, concurrency 10",
    "c10_p2": "2 processes, concurrency 10 each",
    "default_p1": "1 process, default concurrency",
    "default_p2": "2 processes, default concurrency",
}
BULK_PATHS = {
    "backwave_django": "`.prepare()` + `enqueue_many`",
    "pgqueuer": "`Queries.enqueue` with lists",
    "procrastinate": "`batch_defer`",
}
SINGLE_PATHS = {
    "backwave_django": "`noop.enqueue()`",
    "pgqueuer": "`Queries.enqueue`",
    "procrastinate": "`noop.defer()`",
}
#: With four keyword arguments (benchmarks/arguments.py), each queue's own way of passing them.
ARGS_PATHS = {
    "backwave_django": "`with_args.enqueue(**kwargs)`, `with_args.enqueue_many([kwargs, ...])`",
    "pgqueuer": "`Queries.enqueue` with `json.dumps(kwargs).encode()` payloads",
    "procrastinate": "`with_args.defer(**kwargs)`, `with_args.batch_defer(*kwargs)`",
}
#: What the rows with arguments call the job's arguments.
WITH_ARGS = "with 4 keyword arguments"


#: The side-by-side targets: backwave_django's figure over PgQueuer's (the fastest peer), at least
#: this much in the same run (docs/performance.md, "Against the targets").
TARGET_PEER = "pgqueuer"
TARGETS = (
    ("enqueue_single", "one per transaction", 1.2),
    ("enqueue_bulk", "bulk", 1.0),
    ("enqueue_single_args", "one per transaction with arguments", 1.2),
    ("enqueue_bulk_args", "bulk with arguments", 1.5),
    *((f"{key}_from_spawn", f"{label}, from spawn", 2.0) for key, label in SETTING_LABELS.items()),
)


def _jobs(rate: Any) -> str:
    return f"{rate:,.0f} jobs/s" if isinstance(rate, int | float) else "—"


def _times(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "—"


def _cell(queue: dict[str, Any], *path: str) -> str:
    if "skipped" in queue:
        return "skipped"
    if "error" in queue:
        return "ERROR"
    value: Any = queue
    for key in path[:-1]:
        value = value.get(key, {}) if isinstance(value, dict) else {}
    if isinstance(value, dict) and "error" in value:
        return "ERROR"
    return _jobs(value.get(path[-1]) if isinstance(value, dict) else None)


def columns(peers: dict[str, Any]) -> list[str]:
    return [name for name in QUEUE_ORDER if name in peers["queues"]]


def rows(results: dict[str, Any]) -> list[dict[str, str]]:
    """One row per figure: the measurement, a cell per queue, the raw baseline, ratios per peer."""
    peers = results["peers"]
    queues, ratios = peers["queues"], peers["ratios"]
    names = columns(peers)
    enqueue = results.get("enqueue") if "error" not in results.get("enqueue", {"error": 1}) else None
    processing = results.get("processing") if "error" not in results.get("processing", {"error": 1}) else None
    table: list[dict[str, str]] = []

    def add(measurement: str, path: tuple[str, ...], raw: str, ratio_key: str) -> None:
        row = {"measurement": measurement}
        for name in names:
            row[name] = _cell(queues[name], *path)
        row["raw"] = raw
        for name in names[1:]:
            row[f"ratio_{name}"] = (
                queues[name]["skipped"].split(":")[0]
                if "skipped" in queues[name]
                else _times(ratios.get(name, {}).get(ratio_key))
            )
        table.append(row)

    add(
        f"Enqueue, one job per transaction, n={peers['enqueue_n']:,}",
        ("enqueue", "single", "rate"),
        _jobs(enqueue["raw_single"]["rate"]) if enqueue else "—",
        "enqueue_single",
    )
    add(
        f"Enqueue, bulk path, {peers['batch']:,} per call, n={peers['n']:,}",
        ("enqueue", "bulk", "rate"),
        _jobs(enqueue["raw_bulk"]["rate"]) if enqueue else "—",
        "enqueue_bulk",
    )
    add(
        f"Enqueue {WITH_ARGS}, one job per transaction, n={peers['enqueue_n']:,}",
        ("enqueue", "single_args", "rate"),
        "—",
        "enqueue_single_args",
    )
    add(
        f"Enqueue {WITH_ARGS}, bulk path, {peers['batch']:,} per call, n={peers['n']:,}",
        ("enqueue", "bulk_args", "rate"),
        "—",
        "enqueue_bulk_args",
    )
    for key in peers["settings"]:
        processes = int(key.rsplit("_p", 1)[1])
        raw = processing.get(f"raw_batch_{processes}") if processing else None
        label = f"Processing, {SETTING_LABELS.get(key, key)}, n={peers['n']:,}"
        add(
            f"{label}, from spawn",
            ("processing", key, "rate"),
            f"{_jobs(raw['rate'])} (claim-32)" if raw else "—",
            f"{key}_from_spawn",
        )
        add(f"{label}, steady (10 % → 90 % done)", ("processing", key, "steady_rate"), "—", f"{key}_steady")
        cpu_row = {"measurement": f"{label}, CPU per job: worker + PostgreSQL", "raw": "—"}
        for name in names:
            cpu_row[name] = _cpu_cell(queues[name], key)
        for name in names[1:]:
            cpu_row[f"ratio_{name}"] = (
                queues[name]["skipped"].split(":")[0]
                if "skipped" in queues[name]
                else _times(_cpu_ratio(queues[names[0]], queues[name], key))
            )
        table.append(cpu_row)
    return table


def _cpu(queue: dict[str, Any], key: str) -> tuple[float, float] | None:
    """A processing run's CPU per job (µs): its workers', PostgreSQL's (None where not measured)."""
    run = queue.get("processing", {}).get(key, {})
    spent = run.get("cpu_us_per_job") or {}
    workers, server = spent.get("workers"), spent.get("postgres")
    if isinstance(workers, int | float) and isinstance(server, int | float):
        return float(workers), float(server)
    return None


def _cpu_cell(queue: dict[str, Any], key: str) -> str:
    if "skipped" in queue:
        return "skipped"
    spent = _cpu(queue, key)
    return "—" if spent is None else f"{spent[0]:,.0f} + {spent[1]:,.0f} µs"


def _cpu_ratio(ours: dict[str, Any], theirs: dict[str, Any], key: str) -> float | None:
    """The peer's CPU per job over backwave_django's (above 100 %: backwave_django used less)."""
    mine, other = _cpu(ours, key), _cpu(theirs, key)
    return sum(other) / sum(mine) if mine and other and sum(mine) else None


def markdown(results: dict[str, Any], table: list[dict[str, str]]) -> str:
    names = columns(results["peers"])
    header = ["Measurement", *names, "raw psycopg", *(f"backwave / {name}" for name in names[1:])]
    keys = ["measurement", *names, "raw", *(f"ratio_{name}" for name in names[1:])]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(row[key] for key in keys) + " |" for row in table]
    return "\n".join(lines)


def details(results: dict[str, Any]) -> list[str]:
    """Versions, what each queue's default is, the paths used, and each run's start-up."""
    peers = results["peers"]
    lines: list[str] = []
    for name in columns(peers):
        queue = peers["queues"][name]
        if "skipped" in queue or "error" in queue:
            lines.append(f"{name}: {queue.get('skipped') or 'ERROR: ' + queue['error']}")
            continue
        first = ", ".join(
            f"{key} {run['first_done_after_s']:.2f} s"
            for key, run in queue.get("processing", {}).items()
            if isinstance(run.get("first_done_after_s"), int | float)
        )
        runs = queue.get("processing", {})
        stuck = [key for key, run in runs.items() if run.get("exited_by_themselves") is False]
        errors = [key for key, run in runs.items() if "error" in run]
        if "error" in queue.get("enqueue", {}):
            errors.append("enqueue")
        lines.append(
            f"{name} {queue.get('version')}: default concurrency {queue.get('default_concurrency')}; "
            f"one per transaction {SINGLE_PATHS[name]}, bulk {BULK_PATHS[name]}; {WITH_ARGS} "
            f"{ARGS_PATHS[name]}; first job done after "
            f"spawn: {first or '—'}"
            + (f"; workers stopped by the harness (they did not exit): {', '.join(stuck)}" if stuck else "")
            + (f"; errors in {', '.join(errors)} (see the JSON)" if errors else "")
        )
    return lines


def targets(results: dict[str, Any]) -> str:
    """One line: each target's ratio of the run, marked PASS or MISS (or why there is none)."""
    peers = results["peers"]
    queue = peers["queues"].get(TARGET_PEER)
    if queue is None or "skipped" in queue or "error" in queue:
        reason = "not run" if queue is None else queue.get("skipped") or "ERROR"
        return f"Against the targets: no verdicts, {TARGET_PEER} {reason}"
    ratios = peers["ratios"].get(TARGET_PEER, {})
    verdicts = []
    for key, label, minimum in TARGETS:
        ratio = ratios.get(key)
        if key.endswith("_from_spawn") and key.removesuffix("_from_spawn") not in peers["settings"]:
            continue
        verdict = "—" if not isinstance(ratio, int | float) else "PASS" if ratio >= minimum else "MISS"
        verdicts.append(f"{label} {_times(ratio)} (≥ {minimum:.0%}) {verdict}")
    return f"Against the targets (backwave_django over {TARGET_PEER}): " + "; ".join(verdicts)


def needs(results: dict[str, Any]) -> list[str]:
    """For each processing target the run missed, what meeting it would have taken. Twice
    PgQueuer's rate from spawn is the n jobs done within so many seconds of spawn; less
    backwave_django's start-up (spawn to its first job done), what is left asks for a steady rate,
    set here beside backwave_django's own and the raw claim-32 loop's of the same run
    (docs/performance.md, "Against the targets")."""
    peers = results["peers"]
    ratios = peers["ratios"].get(TARGET_PEER, {})
    theirs = peers["queues"].get(TARGET_PEER, {}).get("processing", {})
    ours = peers["queues"].get("backwave_django", {}).get("processing", {})
    processing = results.get("processing") or {}
    minimums = {key: minimum for key, _, minimum in TARGETS}
    lines = []
    for key in peers["settings"]:
        ratio, minimum = ratios.get(f"{key}_from_spawn"), minimums[f"{key}_from_spawn"]
        peer, mine = theirs.get(key, {}), ours.get(key, {})
        figures = (peer.get("rate"), mine.get("first_done_after_s"), mine.get("steady_rate"))
        if not isinstance(ratio, int | float) or ratio >= minimum:
            continue
        if not all(isinstance(figure, int | float) for figure in figures):
            continue
        peer_rate, start, steady = figures
        within = peers["n"] / (minimum * peer_rate)
        line = (
            f"{SETTING_LABELS.get(key, key)}: {minimum:.0f} times {TARGET_PEER}'s {_jobs(peer_rate)} "
            f"from spawn is {peers['n']:,} jobs in {within:.2f} s; "
        )
        if within <= start:
            lines.append(line + f"backwave_django's first job alone took {start:.2f} s after spawn")
            continue
        need = peers["n"] / (within - start)
        line += (
            f"after backwave_django's {start:.2f} s to its first job that needs {_jobs(need)} in steady "
            f"state, {need / steady:.0%} of its own steady rate ({_jobs(steady)})"
        )
        raw = processing.get(f"raw_batch_{key.rsplit('_p', 1)[1]}", {}).get("steady_rate")
        if isinstance(raw, int | float):
            line += f" and {need / raw:.0%} of the raw claim-32 loop's ({_jobs(raw)})"
        lines.append(line)
    return lines
