"""``backwave jobs`` and ``backwave show``: filters, paging, tables, JSON and the sensitive parts."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from backwave_django import Failure
from backwave_django.core.states import DependencyMode

from ..conftest import T0, enqueue, lease_one, report

pytestmark = pytest.mark.django_db(transaction=True)

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_jobs_filters_pages_and_prints_json(cli):
    acme = [
        enqueue(queue="billing", wire_name="send-invoice", tags=("vip", ("tenant", "acme"))) for _ in range(3)
    ]
    other = enqueue(queue="billing", wire_name="send-invoice", tags=(("tenant", "globex"),))
    plain = enqueue(queue="default", wire_name="cleanup")
    dead = enqueue(queue="mail", wire_name="send-mail", tags=("vip",), max_attempts=1)
    lease_one(dead)
    report(dead, Failure(next_due_time=None, error="boom"), failure_detail="ValueError: boom")

    filtered = cli(
        "jobs", "--json", "--queue", "billing", "--tag", "tenant=acme", "--tag", "vip", "--state", "Scheduled"
    )
    assert [uuid.UUID(job["job_id"]) for job in filtered.json()] == acme
    first = filtered.json()[0]
    assert first["wire_name"] == "send-invoice"
    assert first["queue"] == "billing"
    assert first["state"] == "scheduled"
    assert first["tags"] == [["", "vip"], ["tenant", "acme"]]
    assert first["due_time"] == "2026-01-01T00:00:00+00:00"

    keyed = cli("jobs", "--json", "--tag", "tenant:", "--newest-first", "--wire-name", "send-invoice")
    assert [uuid.UUID(job["job_id"]) for job in keyed.json()] == [other, *reversed(acme)]
    dead_letters = cli("jobs", "--json", "--state", "DEAD-LETTERED", "--label", "vip")
    assert [(job["job_id"], job["state"]) for job in dead_letters.json()] == [(str(dead), "dead_lettered")]

    page = cli("jobs", "--limit", "2")
    assert page.returncode == 0
    header, *rows, blank, hint = page.lines
    assert header.split()[:4] == ["SEQUENCE", "JOB", "ID", "WIRE"]
    assert [row.split()[1] for row in rows] == [str(acme[0]), str(acme[1])]
    # Aligned: every row's job id starts in the header's JOB ID column.
    column = header.index("JOB ID")
    assert all(row[column:].startswith(str(job)) for row, job in zip(rows, acme, strict=False))
    assert "2026-01-01T00:00:00Z" in rows[0]
    assert "tenant=acme" in rows[0]
    assert "vip" in rows[0]
    after = re.search(r"--after (\d+)", hint)
    assert blank == "", page
    assert after, page

    rest = cli("jobs", "--json", "--limit", "500", "--after", after.group(1))
    assert [uuid.UUID(job["job_id"]) for job in rest.json()] == [acme[2], other, plain, dead]


def test_show_prints_the_record_history_and_edges_and_hides_sensitive_parts(cli):
    parent = enqueue(
        queue="billing",
        payload={"args": ["secret-card-number"], "kwargs": {}},
        tags=(("tenant", "acme"),),
        trace_context=TRACEPARENT,
    )
    child = enqueue(parents=(parent,), mode=DependencyMode.ON_SUCCESS)
    lease_one(parent)
    report(
        parent,
        Failure(next_due_time=T0 + timedelta(seconds=5), error="boom"),
        failure_detail="ValueError: card declined",
    )

    text = cli("show", str(parent))
    assert text.returncode == 0, text
    assert re.search(r"^state\s+Scheduled$", text.stdout, re.M)
    assert re.search(r"^queue\s+billing$", text.stdout, re.M)
    assert re.search(r"^tags\s+tenant=acme$", text.stdout, re.M)
    assert re.search(rf"^children\s+{child}$", text.stdout, re.M)
    assert re.search(rf"^trace context\s+{TRACEPARENT}$", text.stdout, re.M)
    assert re.search(r"^\s+2\s+Scheduled\s+1\s+worker-a\s+2026-01-01T00:00:00Z$", text.stdout, re.M)
    assert "secret-card-number" not in text.stdout
    assert "card declined" not in text.stdout
    assert "shown with --sensitive" in text.stdout

    (shown,) = cli("show", str(parent), "--json", "--sensitive").json()
    assert (shown["job_id"], shown["state"], shown["attempt"]) == (str(parent), "scheduled", 1)
    assert shown["children"] == [str(child)]
    assert shown["parents"] == []
    assert shown["trace_context"] == TRACEPARENT
    assert [(e["ordinal"], e["state"], e["actor"]) for e in shown["history"]] == [
        (0, "scheduled", "enqueue"),
        (1, "leased", "worker-a"),
        (2, "scheduled", "worker-a"),
    ]
    assert shown["history"][2]["failure_detail"] == "ValueError: card declined"
    assert shown["payload"] == {"args": ["secret-card-number"], "kwargs": {}}

    (plain,) = cli("show", str(child), "--json").json()
    assert plain["parents"] == [str(parent)]
    assert "payload" not in plain
    assert plain["trace_context"] is None
    assert not re.search(r"^trace context", cli("show", str(child)).stdout, re.M)
    assert "failure_detail" not in plain["history"][0]

    refused = cli("show", str(parent), "--sensitive", BACKWAVE_DISABLE_SENSITIVE_DATA="yes")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert "BACKWAVE_DISABLE_SENSITIVE_DATA" in refused.stderr

    missing = cli("show", str(uuid.uuid4()))
    assert missing.returncode == 1
    assert "No job" in missing.stderr
