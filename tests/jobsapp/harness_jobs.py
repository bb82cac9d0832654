"""Jobs the virtual-time harness tests run: the kinds of jobs users write and need to test.

Imported from ``tests/jobsapp/jobs.py`` so that they register at startup like any app's jobs.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from types import SimpleNamespace

from backwave_django import JobContext, job


@job("harness.charge-card", max_attempts=4, backoff=[10, 60], takes_context=True)
def charge_card(ctx: JobContext, order_id: str, fail_attempts: int = 0) -> dict[str, object]:
    """A call to a flaky gateway: the first ``fail_attempts`` attempts time out."""
    if ctx.attempt <= fail_attempts:
        raise TimeoutError(f"gateway timed out charging {order_id}")
    return {"order": order_id, "charged_on_attempt": ctx.attempt}


@job("harness.square")
def square(n: int) -> int:
    return n * n


@job("harness.total", takes_context=True)
def total(ctx: JobContext, part_ids: list[str]) -> int:
    """Fan-in: sum the outputs of the parts it waited for."""
    return sum(ctx.parent_output(uuid.UUID(part)) for part in part_ids)


@job("harness.fan-out")
def fan_out(numbers: list[int]) -> dict[str, object]:
    """Fan-out: one ``square`` per number, and a ``total`` that runs once they all succeeded."""
    parts = [square.enqueue(n).job_id for n in numbers]
    total_id = total.using(parents=parts).enqueue([str(p) for p in parts]).job_id
    return {"parts": len(parts), "total": str(total_id)}


def fetch_page(page: int) -> list[int]:
    """Stands in for a slow external call; tests replace it to act while the export runs."""
    return [page]


@job("harness.export", takes_context=True, tags=["exports"])
def export(ctx: JobContext, pages: int) -> int:
    """A long job that checks for cancellation between pages."""
    rows = 0
    for page in range(pages):
        ctx.raise_if_cancelled()
        rows += len(fetch_page(page))
        ctx.add_tag("progress", str(page + 1))
    return rows


@job("harness.digest", queue="digests")
def digest(region: str) -> str:
    return f"digest for {region}"


@job("harness.async-greet", takes_context=True)
async def async_greet(ctx: JobContext, name: str) -> str:
    ctx.add_label("async")
    return f"hello {name} (attempt {ctx.attempt})"


@job("harness.async-flaky", max_attempts=2, backoff=[5])
async def async_flaky() -> None:
    raise ConnectionError("upstream refused the connection")


@job("harness.remind")
def remind(user: str) -> str:
    """Enqueues its own follow-up a day later: a job chain driven by time."""
    follow_up.using(run_after=timedelta(days=1)).enqueue(user)
    return f"reminded {user}"


@job("harness.follow-up")
def follow_up(user: str) -> str:
    return f"followed up {user}"


@job("harness.loop")
def loop_forever() -> None:
    """Re-enqueues itself at once: the harness must stop it, not hang."""
    loop_forever.enqueue()


# --- The example app of docs/testing.md ("billing"), with stand-ins for its collaborators ---------

gateway = SimpleNamespace(charge=lambda order_id: f"r-{order_id}")
mailer = SimpleNamespace(send_receipt=lambda order_id: None)
reports = SimpleNamespace(build=lambda region: f"report for {region}")


@job("billing.charge-card", queue="billing", max_attempts=4, backoff=[10, 60])
def charge_card_example(order_id: str) -> dict[str, object]:
    receipt = gateway.charge(order_id)
    send_receipt.enqueue(order_id)
    return {"receipt": receipt}


@job("billing.send-receipt", queue="emails")
def send_receipt(order_id: str) -> None:
    mailer.send_receipt(order_id)


@job("billing.daily-report", queue="reports")
def daily_report(region: str) -> str:
    return str(reports.build(region))
