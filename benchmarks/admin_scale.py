"""Scale check for the operator console: ``python -m benchmarks.admin_scale [--rows 1000000]``.

Fills a scratch PostgreSQL database with ``--rows`` jobs spread over every state, eight queues and
twenty wire names (with a realistic transition log, some tags, workers, queue settings and
schedules), then times the console pages through Django's test client, logged in as a
superuser: the Dashboard (page and live fragment), the jobs changelist (first page, filtered by
state, by queue, by both, by tags; the tag search and its JSON endpoint) and a job's detail page;
and the monitor's query API (``TAG_MIX`` is the tag mix). Each page is requested once to warm up,
then ``--repeat`` times; the median is what counts (target: the job list under 300 ms).

Prints a Markdown table and writes everything, including the slowest SQL of each page and its
``EXPLAIN ANALYZE`` for pages over the target, to ``benchmarks/results/admin_scale.json``.
Timings are reported, never asserted. Other load on the machine shows up in the numbers: the
load average at start and end is recorded next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

TARGET_MS = 300.0
QUEUES = ("default", "mail", "billing", "reports", "webhooks", "images", "search", "exports")
WIRE_NAMES = 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.admin_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="jobs to fill (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=7, help="timed requests per page (default 7)")
    parser.add_argument(
        "--db",
        default=os.environ.get("BACKWAVE_ADMIN_BENCH_DB", "backwave_admin_bench"),
        help="scratch database, dropped and re-created (default backwave_admin_bench)",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the scratch database behind")
    args = parser.parse_args(argv)
    if args.rows < 1000:
        parser.error("--rows must be at least 1000 (the fill spreads states per block of 1,000)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


# --- Settings and URLs -----------------------------------------------------------------------


def configure(dbname: str) -> None:
    """The benchmark settings plus what the admin needs (sessions, messages, templates, URLs)."""
    from django.conf import settings

    from . import settings as base

    database = dict(base.DATABASES["default"], NAME=dbname, CONN_MAX_AGE=600)
    settings.configure(
        SECRET_KEY=base.SECRET_KEY,
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEBUG=False,
        ALLOWED_HOSTS=["testserver"],
        DEFAULT_AUTO_FIELD=base.DEFAULT_AUTO_FIELD,
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "backwave_django",
            "benchmarks",
        ],
        DATABASES={"default": database},
        BACKWAVE=base.BACKWAVE,
        LOGGING=base.LOGGING,
        ROOT_URLCONF="benchmarks.admin_scale",
        STATIC_URL="/static/",
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
    )


def __getattr__(name: str) -> Any:
    """This module is its own ROOT_URLCONF: the admin, built only when Django asks for it."""
    if name == "urlpatterns":
        from django.contrib import admin
        from django.urls import path

        return [path("admin/", admin.site.urls)]
    raise AttributeError(name)


# --- The fill --------------------------------------------------------------------------------

# Per block of 1,000 consecutive jobs (``g mod 1000``): the state mix of a long-running system.
_STATE_CASE = """CASE
    WHEN g %% 1000 < 800 THEN 3   -- Succeeded
    WHEN g %% 1000 < 830 THEN 4   -- Cancelled
    WHEN g %% 1000 < 850 THEN 5   -- Dead-Lettered
    WHEN g %% 1000 < 855 THEN 6   -- Quarantined
    WHEN g %% 1000 < 875 THEN 1   -- Awaiting Parent
    WHEN g %% 1000 < 877 THEN 2   -- Leased
    ELSE 0                       -- Scheduled
END"""

_FILL_JOBS = f"""
INSERT INTO backwave_django_jobrecord
    (job_id, wire_name, queue, payload, state, due_time, attempt, lease_owner, lease_expiry,
     cancel_requested, terminal_at, terminal_cause, parents_remaining, mode, enqueued_at, next_ordinal)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       'job-' || ((g / 37) %% {WIRE_NAMES}),
       (%(queues)s::text[])[1 + (g / 1000) %% {len(QUEUES)}],
       jsonb_build_object('args', jsonb_build_array(g), 'kwargs', '{{}}'::jsonb),
       s.state,
       CASE WHEN s.state = 0 AND g %% 2 = 0 THEN now() + make_interval(secs => g %% 3600)
            ELSE s.at END,
       CASE WHEN s.state IN (0, 1) THEN 0 WHEN s.state = 5 THEN 10 ELSE 1 END,
       CASE WHEN s.state = 2 THEN 'bench-host:' || (g %% 4) || ':w' END,
       CASE WHEN s.state = 2 THEN now() + interval '45 seconds' END,
       false,
       CASE WHEN s.state >= 3 THEN s.at END,
       CASE s.state WHEN 4 THEN 'operator' WHEN 5 THEN 'ConnectionError: upstream refused (' || g || ')'
                    WHEN 6 THEN 'no handler registered for wire name ''job-gone''' END,
       CASE WHEN s.state = 1 THEN 1 ELSE 0 END,
       0,
       s.at - interval '2 seconds',
       CASE WHEN s.state >= 3 THEN 3 WHEN s.state = 2 THEN 2 ELSE 1 END
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN LATERAL (
    -- Spread over the last 24 hours, newest last: the last hour holds about 1/24 of the rows.
    SELECT {_STATE_CASE} AS state,
           now() - make_interval(secs => (%(rows)s - g) * 86400.0 / %(rows)s) AS at
) AS s
"""


# The tag mix (about 1.8 tags per job): labels common and rare, low- and high-cardinality keys, and
# mixed case, so the facets and suggestions meet what a real table holds. ``g`` is the sequence.
TAG_MIX = (
    # (key, value expression, condition, what it stands for)
    ("''", "'vip'", "g % 10 = 0", "a common label (10%)"),
    ("''", "'urgent'", "g % 50 = 1", "a rarer label (2%)"),
    ("''", "'Priority-Customer'", "g % 97 = 0", "a mixed-case label (1%)"),
    ("''", "'batch-' || (g / 1000)", "g % 5 = 2", "a label per batch of 1,000 jobs (20%)"),
    ("'tenant'", "'tenant-' || ((g / 10) % 2000)", "g % 10 IN (0, 1, 2)", "2,000 tenants (30%)"),
    (
        "'region'",
        "(ARRAY['eu-west-1', 'eu-central-1', 'us-east-1', 'us-west-2', 'ap-south-1', "
        "'AP-Southeast-2'])[1 + (g / 2) % 6]",
        "g % 2 = 0",
        "six regions (50%)",
    ),
    ("'customer'", "'cust-' || ((g / 5) % 100000)", "g % 5 = 3", "100,000 customers (20%)"),
    ("'order'", "'ord-' || g", "g % 10 = 4", "an order id per job (10%)"),
    ("'Source'", "(ARRAY['api', 'cron', 'admin'])[1 + (g / 3) % 3]", "g % 3 = 0", "a mixed-case key (33%)"),
)
_FILL_TAGS = "INSERT INTO backwave_django_jobtag (job_id, key, value)\n" + "\nUNION ALL\n".join(
    f"SELECT g, {key}, {value} FROM (SELECT sequence AS g FROM backwave_django_jobrecord) AS j WHERE {where}"
    for key, value, where, _ in TAG_MIX
)


def fill(conn: Any, rows: int) -> dict[str, float]:
    """Jobs, transitions, tags, workers, queue settings and schedules; then VACUUM ANALYZE."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    conn.execute(_FILL_JOBS, {"rows": rows, "queues": list(QUEUES)})
    timings["jobs_s"] = time.perf_counter() - started

    step = time.perf_counter()
    # Transition states: enqueue → Scheduled (or Awaiting Parent), claim → Leased, outcome → final.
    conn.execute(
        """
        INSERT INTO backwave_django_jobtransition
            (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
        SELECT j.sequence, o.ordinal,
               CASE WHEN o.ordinal = 2 THEN coalesce(j.terminal_at, j.enqueued_at + interval '2 seconds')
                    ELSE j.enqueued_at + o.ordinal * interval '1 second' END,
               CASE o.ordinal WHEN 0 THEN CASE WHEN j.state = 1 THEN 1 ELSE 0 END
                              WHEN 1 THEN 2 ELSE j.state END,
               CASE WHEN o.ordinal = 0 THEN 0 ELSE j.attempt END,
               CASE WHEN o.ordinal = 2 AND j.state = 5 THEN 'ConnectionError: upstream refused' END,
               CASE WHEN o.ordinal = 0 THEN 'enqueue' ELSE coalesce(j.lease_owner, 'bench-host:1:w') END
        FROM backwave_django_jobrecord AS j
        CROSS JOIN generate_series(0, 2) AS o(ordinal)
        WHERE o.ordinal < j.next_ordinal
        ORDER BY j.sequence, o.ordinal
        """
    )
    # Failed attempts that were retried: a few per minute over the last hour, for the chart.
    conn.execute(
        """
        INSERT INTO backwave_django_jobtransition
            (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
        SELECT j.sequence, 3, j.terminal_at - interval '1 second', 0, 1,
               'TimeoutError: slow', 'bench-host:2:w'
        FROM backwave_django_jobrecord AS j
        WHERE j.state = 3 AND j.terminal_at > now() - interval '1 hour' AND j.sequence % 50 = 0
        """
    )
    timings["transitions_s"] = time.perf_counter() - step

    step = time.perf_counter()
    # Each Awaiting Parent job waits on a Scheduled job of its block (sequence = g in a fresh table).
    conn.execute(
        """
        INSERT INTO backwave_django_jobdependency (parent_id, child_id)
        SELECT p.sequence, c.sequence
        FROM backwave_django_jobrecord AS c
        JOIN backwave_django_jobrecord AS p ON p.sequence = (c.sequence / 1000) * 1000 + 900 AND p.state = 0
        WHERE c.state = 1
        """
    )
    conn.execute(_FILL_TAGS)
    conn.execute(
        """
        INSERT INTO backwave_django_workernode
            (worker_id, hostname, pid, queues, concurrency, started_at, last_seen_at)
        SELECT 'bench-host:' || n || ':w', 'bench-host', 1000 + n, '["default", "mail"]'::jsonb, 20,
               now() - interval '1 hour', CASE WHEN n = 3 THEN now() - interval '1 hour' ELSE now() END
        FROM generate_series(0, 3) AS n
        """
    )
    conn.execute(
        """
        INSERT INTO backwave_django_queuesettings (queue, paused, concurrency_limit)
        VALUES ('reports', true, NULL), ('mail', false, 5), ('billing', false, 100)
        """
    )
    conn.execute(
        """
        INSERT INTO backwave_django_recurringschedule
            (schedule_id, cron, wire_name, payload, queue, time_zone, catch_up, no_overlap, cursor,
             skipped_ticks, declared_in_settings)
        SELECT 'schedule-' || n, '0 */5 * * * *', 'job-' || n, '{"args": [], "kwargs": {}}'::jsonb, 'default',
               CASE WHEN n = 0 THEN 'Mars/Olympus' END, 0, n % 2 = 0, now(),
               CASE WHEN n = 1 THEN '["2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"]'::jsonb
                    ELSE '[]'::jsonb END,
               false
        FROM generate_series(0, 9) AS n
        """
    )
    timings["tags_and_rest_s"] = time.perf_counter() - step

    step = time.perf_counter()
    for table in (
        "backwave_django_jobrecord",
        "backwave_django_jobtransition",
        "backwave_django_jobtag",
        "backwave_django_jobdependency",
        "backwave_django_workernode",
        "backwave_django_queuesettings",
        "backwave_django_recurringschedule",
    ):
        conn.execute(f"VACUUM ANALYZE {table}")
    conn.execute("CHECKPOINT")
    timings["vacuum_analyze_s"] = time.perf_counter() - step
    timings["total_s"] = time.perf_counter() - started
    return timings


# --- Timing ----------------------------------------------------------------------------------


def _explain(sql: str, params: Any) -> str:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    return plan


def time_page(client: Any, url: str, repeat: int) -> dict[str, Any]:
    """Warm up once, then ``repeat`` timed requests; the slowest SQL of the last one, with timings."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = client.get(url)
    if first.status_code != 200:
        raise RuntimeError(f"GET {url} answered {first.status_code}")
    samples = []
    cpu_samples = []
    captured: list[dict[str, Any]] = []
    for i in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started, cpu_started = time.perf_counter(), time.process_time()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            cpu_samples.append((time.process_time() - cpu_started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        samples.append(elapsed)
        if i == repeat - 1:
            captured = list(queries.captured_queries)
    slowest = sorted(captured, key=lambda q: float(q["time"]), reverse=True)[:3]
    return {
        "url": url,
        "median_ms": statistics.median(samples),
        "min_ms": min(samples),
        "max_ms": max(samples),
        "samples_ms": samples,
        # CPU this process spent (Django and templates, not the database): on a loaded machine it
        # tells the page's own cost from the time spent waiting for a core.
        "django_cpu_ms": statistics.median(cpu_samples),
        "queries": len(captured),
        "sql_ms": sum(float(q["time"]) * 1000 for q in captured),
        "slowest_sql": [{"ms": float(q["time"]) * 1000, "sql": q["sql"]} for q in slowest],
    }


def time_monitor(repeat: int) -> dict[str, float]:
    """Median milliseconds of each read model the dashboard is built from."""
    from django.utils import timezone

    from backwave_django import monitor

    now = timezone.now()
    depths = monitor.queue_depths()
    parts: dict[str, Callable[[], object]] = {
        "queue_depths": monitor.queue_depths,
        "queue_statuses": lambda: monitor.queue_statuses(depths),
        "queue_latency": lambda: monitor.queue_latency(now=now),
        "schedule_health": monitor.schedule_health,
        "worker_statuses": lambda: monitor.worker_statuses(now=now),
        "throughput": lambda: monitor.throughput(now=now),
        "executing": lambda: monitor.executing(now=now),
        "needs_attention": monitor.needs_attention,
    }
    result = {}
    for name, call in parts.items():
        call()
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            call()
            samples.append((time.perf_counter() - started) * 1000)
        result[name] = statistics.median(samples)
    return result


def time_monitor_reads(repeat: int) -> dict[str, float]:
    """Median milliseconds of the monitor's query API, the tag reads above all (docs/monitor.md)."""
    from backwave_django import monitor
    from backwave_django.models import JobRecord
    from backwave_django.monitor import HasKey, HasKeyValue, HasLabel, JobQuery

    newest = JobRecord.objects.order_by("-sequence").values_list("sequence", flat=True)[0]
    jobs = JobRecord.objects.all()
    parts: dict[str, Callable[[], object]] = {
        "list_jobs() oldest first": lambda: monitor.list_jobs(JobQuery()),
        "list_jobs(newest_first, HasLabel vip)": lambda: monitor.list_jobs(
            JobQuery(tags=(HasLabel("vip"),), newest_first=True)
        ),
        "list_jobs(HasKeyValue tenant-7, HasKey region), page 2": lambda: monitor.list_jobs(
            JobQuery(
                tags=(HasKeyValue("tenant", "tenant-7"), HasKey("region")),
                newest_first=True,
                after_sequence=newest - 200_000,
            )
        ),
        "count_jobs()": monitor.count_jobs,
        "tag_facet('region') (500k rows)": lambda: monitor.tag_facet("region"),
        "tag_facet('tenant', top 20) (300k rows)": lambda: monitor.tag_facet("tenant", max_results=20),
        "tag_facet('', queue=mail and vip)": lambda: monitor.tag_facet(
            "", JobQuery(queue="mail", tags=(HasLabel("vip"),)), max_results=20
        ),
        "facet_sample('tenant') (the console's)": lambda: monitor.facet_sample(
            "tenant", jobs, max_results=20
        ),
        "facet_sample('') (the console's)": lambda: monitor.facet_sample("", jobs, max_results=20),
        "suggest_tags('') labels then keys": lambda: monitor.suggest_tags(""),
        "suggest_tags('b')": lambda: monitor.suggest_tags("b"),
        "suggest_tags('t') (only keys match)": lambda: monitor.suggest_tags("t"),
        "suggest_tags('', after=('', 'vip')) (the keys)": lambda: monitor.suggest_tags("", after=("", "vip")),
        "suggest_tags('', key='tenant')": lambda: monitor.suggest_tags("", key="tenant"),
        "suggest_tags('', key='region')": lambda: monitor.suggest_tags("", key="region"),
        "suggest_tags('ord-5', key='order')": lambda: monitor.suggest_tags("ord-5", key="order"),
        "suggest_tags('', key='customer'), page 2": lambda: monitor.suggest_tags(
            "", key="customer", after=("customer", "cust-10043")
        ),
    }
    result = {}
    for name, call in parts.items():
        call()
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            call()
            samples.append((time.perf_counter() - started) * 1000)
        result[name] = statistics.median(samples)
    return result


def pages(dead_lettered_pk: int) -> list[tuple[str, str, bool]]:
    """(name, url, held to the 300 ms target) for every timed page."""
    from django.urls import reverse

    jobs = reverse("admin:backwave_django_jobrecord_changelist")
    suggest = reverse("admin:backwave_django_jobrecord_tag_suggestions")
    return [
        ("Dashboard", reverse("admin:backwave_django_dashboard_changelist"), False),
        ("Dashboard live fragment", reverse("admin:backwave_django_dashboard_fragment"), False),
        ("Jobs, first page", jobs, True),
        ("Jobs, state = Dead-Lettered", f"{jobs}?state__exact=5", True),
        ("Jobs, queue = mail", f"{jobs}?queue=mail", True),
        ("Jobs, queue = mail and state = Scheduled", f"{jobs}?queue=mail&state__exact=0", True),
        ("Jobs, Retrying view", f"{jobs}?retrying=1", True),
        ("Jobs, tag = vip (label)", f"{jobs}?tl=vip", True),
        ("Jobs, tag = vip, page 20", f"{jobs}?tl=vip&p=20", True),
        ("Jobs, tag tenant = tenant-7 (0.015%)", f"{jobs}?tk=tenant&tv=tenant-7", True),
        ("Jobs, tag key region (any value)", f"{jobs}?tk=region", True),
        ("Jobs, queue = mail and tag = vip", f"{jobs}?queue=mail&tl=vip", True),
        ("Jobs, tag search 'cu' (no JS)", f"{jobs}?tq=cu", True),
        ("Tag suggestions JSON, q=cu", f"{suggest}?q=cu", True),
        ("Tag suggestions JSON, key=order, q=ord-12", f"{suggest}?key=order&q=ord-12", True),
        (
            "Job detail (Dead-Lettered)",
            reverse("admin:backwave_django_jobrecord_change", args=[dead_lettered_pk]),
            False,
        ),
        # The Queues page counts jobs per queue and state like the Dashboard (one GROUP BY over the
        # table) and adds per-queue latency and throughput; the Workers page reads Leased jobs only.
        ("Queues", reverse("admin:backwave_django_queuesettings_changelist"), False),
        ("Workers", reverse("admin:backwave_django_workernode_changelist"), True),
        (
            "Requeue all Dead-Lettered: confirmation",
            reverse("admin:backwave_django_jobrecord_all", args=["requeue"]) + "?state__exact=5",
            True,
        ),
    ]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| page | median | min | max | Django CPU | queries | SQL time | target |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['name']} | ERROR: {row['error']} | | | | | | |")
            continue
        target = ("PASS" if row["median_ms"] < TARGET_MS else "MISS") if row["targeted"] else "—"
        lines.append(
            f"| {row['name']} | {row['median_ms']:.0f} ms | {row['min_ms']:.0f} ms | {row['max_ms']:.0f} ms "
            f"| {row['django_cpu_ms']:.0f} ms | {row['queries']} | {row['sql_ms']:.0f} ms | {target} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from . import harness

    configure(args.db)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    from backwave_django.models import JobRecord

    harness.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    print(f"Scratch database {args.db}: re-creating and migrating …", flush=True)
    harness.recreate_database(args.db)
    conn = None
    try:
        call_command("migrate", verbosity=0)
        conn = harness.connect(args.db)
        load_start = os.getloadavg()
        print(f"Filling {args.rows:,} jobs …", flush=True)
        fill_timings = fill(conn, args.rows)
        counts = dict(
            conn.execute(
                "SELECT 'jobs', count(*) FROM backwave_django_jobrecord UNION ALL "
                "SELECT 'transitions', count(*) FROM backwave_django_jobtransition UNION ALL "
                "SELECT 'tags', count(*) FROM backwave_django_jobtag"
            ).fetchall()
        )
        print(
            f"Filled in {fill_timings['total_s']:.0f} s: {counts['jobs']:,} jobs, "
            f"{counts['transitions']:,} transitions, {counts['tags']:,} tags.",
            flush=True,
        )
        User.objects.create_superuser("bench-admin", password="not-secret")
        client = Client()
        client.force_login(User.objects.get(username="bench-admin"))
        dead = JobRecord.objects.filter(state=5).order_by("-sequence").values_list("pk", flat=True).first()
        assert dead is not None

        results = []
        for name, url, targeted in pages(dead):
            print(f"… {name}", end="", flush=True)
            try:
                measured = time_page(client, url, args.repeat)
            except Exception as exc:
                results.append(
                    {"name": name, "url": url, "targeted": targeted, "error": f"{type(exc).__name__}: {exc}"}
                )
                print(" ERROR", flush=True)
                continue
            measured.update(name=name, targeted=targeted)
            if measured["median_ms"] >= TARGET_MS and measured["slowest_sql"]:
                slow = measured["slowest_sql"][0]["sql"]
                try:
                    measured["explain_slowest"] = _explain(slow, None)
                except Exception as exc:  # the captured SQL is already interpolated; report, go on
                    measured["explain_slowest"] = f"could not EXPLAIN: {exc}"
            results.append(measured)
            print(f" {measured['median_ms']:.0f} ms", flush=True)
        breakdown = time_monitor(args.repeat)
        reads = time_monitor_reads(args.repeat)
    finally:
        if conn is not None:
            conn.close()
        connections.close_all()
        if not args.keep_db:
            try:
                harness.drop_database(args.db)
            except Exception as exc:  # cleanup must not mask the real outcome
                print(f"Could not drop {args.db}: {exc}", file=sys.stderr)

    table = markdown(results)
    monitor_lines = "\n".join(f"| `monitor.{name}` | {ms:.1f} ms |" for name, ms in breakdown.items())
    print()
    print(
        f"Console pages with {args.rows:,} jobs "
        f"(median of {args.repeat}; target: job list < {TARGET_MS:.0f} ms)"
    )
    print()
    print(table)
    print()
    print("| dashboard read model | median |\n|---|--:|\n" + monitor_lines)
    print()
    read_lines = "\n".join(f"| `{name}` | {ms:.1f} ms |" for name, ms in reads.items())
    print("| monitor query | median |\n|---|--:|\n" + read_lines)
    out = harness.RESULTS_DIR / "admin_scale.json"
    out.write_text(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "rows": args.rows,
                "repeat": args.repeat,
                "cpus": os.cpu_count(),
                "loadavg_at_start": load_start,
                "loadavg_at_end": os.getloadavg(),
                "fill": fill_timings,
                "counts": counts,
                "pages": results,
                "monitor_ms": breakdown,
                "monitor_reads_ms": reads,
                "tag_mix": [{"key": k, "value": v, "where": w, "what": what} for k, v, w, what in TAG_MIX],
                "markdown": table,
            },
            indent=2,
            default=str,
        )
    )
    print(f"\nWrote {out.relative_to(harness.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
