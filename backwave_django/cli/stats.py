"""``backwave stats``: where the jobs are, how long due jobs wait, who is working, what failed.

All of it from the dashboard's reads in :mod:`backwave_django.monitor` (the same numbers the
console's Dashboard shows): counts by queue and state, the oldest due-but-unclaimed job per queue,
the registered workers (live or stale by the workers' own rule), and the jobs Dead-Lettered in the
last hour per queue (from the transition log; unknown while ``HISTORY`` is ``OFF``).
"""

from __future__ import annotations

from typing import Any

from .. import clock, monitor
from .output import Output, instant, span, when
from .queues import queue_rows, state_headings
from .values import EXIT_DONE

#: The dead-letter count looks back this many minutes.
DEAD_LETTER_WINDOW_MINUTES = 60


def stats_command(options: dict[str, Any], out: Output) -> int:
    now = clock.now()
    queues = queue_rows()
    latency = monitor.queue_latency(now=now)
    workers = monitor.worker_statuses(now=now)
    window = monitor.queue_throughput(now=now, minutes=DEAD_LETTER_WINDOW_MINUTES)
    dead = {queue: entry.dead_lettered for queue, entry in window.by_queue.items() if entry.dead_lettered}
    live = [worker for worker in workers if worker.live]
    if options["json"]:
        out.json(
            {
                "now": instant(now),
                "queues": [
                    {key: row[key] for key in ("queue", "paused", "concurrency_limit", "counts", "total")}
                    for row in queues
                ],
                "latency": [
                    {
                        "queue": entry.queue,
                        "oldest_due": instant(entry.oldest_due),
                        "waiting_seconds": entry.age.total_seconds(),
                    }
                    for entry in latency
                ],
                "workers": {
                    "live": len(live),
                    "stale": len(workers) - len(live),
                    "live_workers": [
                        {
                            "worker_id": w.worker_id,
                            "hostname": w.hostname,
                            "queues": w.queues,
                            "concurrency": w.concurrency,
                            "last_seen_at": instant(w.last_seen_at),
                        }
                        for w in live
                    ],
                },
                "dead_lettered_last_hour": sum(dead.values()) if window.recording else None,
                "dead_lettered_last_hour_by_queue": dead if window.recording else None,
                "dead_lettered_counted_from": instant(window.counted_from),
            }
        )
        return EXIT_DONE
    out.line(f"BackWave at {when(now)}")
    out.line()
    if queues:
        out.table(
            ("QUEUE", *state_headings(), "TOTAL"),
            ((row["queue"], *row["counts"].values(), row["total"]) for row in queues),
        )
    else:
        out.line("No jobs.")
    out.line()
    if latency:
        out.line("Waiting to be claimed (oldest due job per queue)")
        out.table(
            ("QUEUE", "OLDEST DUE", "WAITING"),
            ((entry.queue, when(entry.oldest_due), span(entry.age)) for entry in latency),
            indent="  ",
        )
    else:
        out.line("Waiting to be claimed: nothing due.")
    stale = len(workers) - len(live)
    out.line(f"Workers: {len(live)} live" + (f", {stale} stale (not seen lately)" if stale else ""))
    for worker in live:
        out.line(
            f"  {worker.worker_id}  queues {','.join(worker.queues) or '-'}  concurrency {worker.concurrency}"
        )
    if not window.recording:
        out.line("Dead-Lettered in the last hour: unknown (HISTORY is OFF: no transition log).")
    else:
        by_queue = ", ".join(f"{queue} {n}" for queue, n in sorted(dead.items()))
        since = f" (counted since {when(window.counted_from)})" if window.counted_from else ""
        out.line(
            f"Dead-Lettered in the last hour: {sum(dead.values())}"
            + (f" ({by_queue})" if by_queue else "")
            + since
        )
    return EXIT_DONE


def add_arguments(subparsers: Any) -> None:
    stats = subparsers.add_parser(
        "stats",
        help="Counts by queue and state, queue latency, live workers, dead letters in the last hour.",
        description="Counts by queue and state, the oldest due-but-unclaimed job per queue, live "
        "workers and the jobs Dead-Lettered in the last hour.",
    )
    stats.add_argument("--json", action="store_true", help="Print a JSON object.")
    stats.set_defaults(run=stats_command)
