"""The shop's background jobs, discovered by backwave_django at startup (like admin.py).

Each job shows one feature:

- ``charge-order`` and ``send-order-confirmation``: an order's work, the confirmation waiting
  for the charge (a dependency) and cancelled if the charge finally fails.
- ``sync-exchange-rates``: a flaky external call that retries with backoff, run every minute by
  the ``exchange-rates`` schedule (settings.BACKWAVE["SCHEDULES"]).
- ``regional-sales`` and ``sales-summary``: a fan-out / fan-in report. One job per region runs
  in parallel; the summary depends on all of them and reads their outputs.
- ``nightly-sales-report``: starts that report every night at 02:00 Europe/Berlin.
- ``rebuild-search-index``: a long job that watches ``ctx.cancel_requested`` and stops cleanly
  when an operator cancels it in the admin.
- ``send-welcome-email``: its parameter was renamed from ``user_id`` to ``customer_id``; jobs
  stored before the rename no longer bind and are Quarantined instead of failing forever.
- ``export-orders-csv``: runs on the ``exports`` queue, which the demo pauses.
- ``shop.alert-dead-letters``: an observer, not a job: the workers call it once for every job that
  dead-letters, and it logs an alert (where a real shop would page someone).
- ``fetch-supplier-feed``, ``import-products``, ``resize-product-images`` and
  ``publish-catalogue``: a supplier's catalogue import as a workflow (docs/workflows.md): the
  feed first, then products and images side by side, then publishing; the console's Workflows
  page draws it and shows whether it is running, failed or done.

Handlers may run more than once (at-least-once execution), so each is safe to repeat.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from backwave_django import (
    JobContext,
    JobState,
    NewJob,
    TransitionEvent,
    enqueue_many,
    job,
    observer,
    workflow,
)

from . import providers

alerts = logging.getLogger("shop.alerts")

#: The shop's business day is Berlin's.
SHOP_TIME_ZONE = ZoneInfo("Europe/Berlin")
REGIONS = ("north", "south", "east", "west", "online")


# --- Orders: a charge, and a confirmation that depends on it ----------------------------------


class PaymentDeclined(Exception):
    """The card was declined; retrying may help (a temporary hold) or not."""


@job("charge-order", queue="billing", max_attempts=3, backoff=[10, 60], tags=["payments"])
def charge_order(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Capture the payment. The charge id derives from the order, so a repeat charges once."""
    if amount_cents <= 0:
        raise PaymentDeclined(f"order {order_id}: nothing to charge ({amount_cents} cents)")
    charge_id = "ch_" + hashlib.sha256(order_id.encode()).hexdigest()[:16]
    return {"charge_id": charge_id, "amount_cents": amount_cents}


@job("send-order-confirmation", queue="emails", max_attempts=4, backoff=[5, 30, 120])
async def send_order_confirmation(order_id: str) -> dict[str, Any]:
    """An ``async def`` handler: it runs on the worker's event loop, not a thread."""
    await asyncio.sleep(0.05)  # the SMTP round trip
    return {"message_id": f"<{order_id}@shop.example>"}


def prepare_order(order_id: str, amount_cents: int, *, run_after: timedelta | None = None) -> list[NewJob]:
    """An order's jobs: the charge, and a confirmation that runs only if the charge succeeds.

    Both ids are keyed by the order, so placing the same order twice stores its jobs once.
    """
    charge = charge_order.using(job_id=order_id, run_after=run_after).prepare(order_id, amount_cents)
    confirmation = send_order_confirmation.using(job_id=order_id, parents=[charge.job_id]).prepare(order_id)
    return [charge, confirmation]


def place_order(order_id: str, amount_cents: int, *, run_after: timedelta | None = None) -> uuid.UUID:
    """Enqueue an order's jobs; returns the charge's job id.

    Call it inside ``transaction.atomic()`` with the order's own writes: the jobs commit or roll
    back with them.
    """
    charge, confirmation = prepare_order(order_id, amount_cents, run_after=run_after)
    enqueue_many([charge, confirmation])
    return charge.job_id


# --- A flaky external call ---------------------------------------------------------------------


@job("sync-exchange-rates", queue="integrations", max_attempts=6, backoff=[2, 4, 8, 16, 32])
def sync_exchange_rates(currency: str) -> dict[str, Any]:
    """Fetch the latest rate. ``ProviderUnavailable`` is an ordinary failure: retried after
    2, 4, 8, 16 then 32 seconds, and Dead-Lettered on the sixth failure in a row."""
    rate = providers.exchange_rates.latest(currency)
    return {"currency": currency, "rate": rate}


# --- Fan-out / fan-in: a report built from parallel parts --------------------------------------


@job("regional-sales", queue="reports")
def regional_sales(region: str, day: str) -> dict[str, Any]:
    orders, revenue_cents = providers.regional_figures(region, day)
    return {"region": region, "day": day, "orders": orders, "revenue_cents": revenue_cents}


@job("sales-summary", queue="reports", takes_context=True)
def sales_summary(ctx: JobContext, day: str, part_job_ids: list[str]) -> dict[str, Any]:
    """Add up the regional parts. It runs only once every part Succeeded (the default
    ON_SUCCESS dependency), so each parent's output is there to read."""
    parts = [ctx.parent_output(uuid.UUID(part_id)) for part_id in part_job_ids]
    missing = [part_id for part_id, part in zip(part_job_ids, parts, strict=True) if part is None]
    if missing:
        raise LookupError(f"sales summary for {day}: no output from part job(s) {', '.join(missing)}")
    return {
        "day": day,
        "orders": sum(part["orders"] for part in parts),
        "revenue_cents": sum(part["revenue_cents"] for part in parts),
        "by_region": {part["region"]: part["revenue_cents"] for part in parts},
    }


def prepare_sales_report(day: str) -> list[NewJob]:
    """One ``regional-sales`` job per region (fan-out) and a ``sales-summary`` that waits for all
    of them (fan-in); the summary comes last.

    Job ids are keyed by the day, so starting the same day's report twice is harmless: the second
    enqueue answers DUPLICATE and leaves the first report alone.
    """
    parts = [regional_sales.using(job_id=f"{day}/{region}").prepare(region, day) for region in REGIONS]
    summary = sales_summary.using(job_id=day, parents=[part.job_id for part in parts]).prepare(
        day, [str(part.job_id) for part in parts]
    )
    return [*parts, summary]


def start_sales_report(day: str) -> uuid.UUID:
    """Enqueue a day's report (see :func:`prepare_sales_report`); returns the summary's job id."""
    jobs = prepare_sales_report(day)
    enqueue_many(jobs)
    return jobs[-1].job_id


def resolve_day(day: str, *, now: datetime | None = None) -> str:
    """``"yesterday"`` or ``"today"`` in the shop's time zone, or an ISO date, as an ISO date."""
    today = (now or datetime.now(SHOP_TIME_ZONE)).astimezone(SHOP_TIME_ZONE).date()
    if day == "today":
        return today.isoformat()
    if day == "yesterday":
        return (today - timedelta(days=1)).isoformat()
    return date.fromisoformat(day).isoformat()


@job("nightly-sales-report", queue="reports")
def nightly_sales_report(day: str = "yesterday") -> dict[str, Any]:
    """Run by the ``nightly-sales-report`` schedule at 02:00 Europe/Berlin."""
    resolved = resolve_day(day)
    summary_id = start_sales_report(resolved)
    return {"day": resolved, "summary_job_id": str(summary_id)}


# --- A long job that an operator can cancel ----------------------------------------------------


@job("rebuild-search-index", queue="maintenance", takes_context=True)
def rebuild_search_index(
    ctx: JobContext, batches: int = 240, seconds_per_batch: float = 0.5
) -> dict[str, Any]:
    """Reindex the catalogue batch by batch, checking for a cancel request between batches.

    Cancelling it in the admin sets the flag with the next lease heartbeat; the handler then
    stops at a batch boundary and the job is recorded Cancelled (``operator-cancel``).
    """
    for batch in range(batches):
        if ctx.cancel_requested:
            ctx.add_tag("stopped-at-batch", str(batch))
            ctx.raise_if_cancelled()
        time.sleep(seconds_per_batch)
    return {"batches": batches}


# --- A job whose signature changed -------------------------------------------------------------


@job("send-welcome-email", queue="emails")
def send_welcome_email(customer_id: int, locale: str = "en") -> dict[str, Any]:
    """Version 2 renamed ``user_id`` to ``customer_id``.

    A job stored by version 1 (``{"kwargs": {"user_id": 17}}``) no longer binds to this
    signature; the worker Quarantines it ("payload for wire name 'send-welcome-email' no longer
    decodes: …") rather than retrying it forever. An operator can requeue it once a handler
    accepts it again.
    """
    return {"sent_to": customer_id, "template": f"welcome.{locale}"}


#: What a version-1 enqueue stored, for the demo data.
LEGACY_WELCOME_PAYLOAD: dict[str, Any] = {"args": [], "kwargs": {"user_id": 17}}


# --- A queue the demo pauses -------------------------------------------------------------------


@job("export-orders-csv", queue="exports")
def export_orders_csv(month: str) -> dict[str, Any]:
    return {"month": month, "file": f"exports/orders-{month}.csv"}


# --- An observer: alert when a job dead-letters -------------------------------------------------


@observer("shop.alert-dead-letters", states=[JobState.DEAD_LETTERED])
def alert_dead_letters(event: TransitionEvent) -> None:
    """Called by a worker, at least once, for every job that dead-letters (docs/observers.md).

    Logging is idempotent enough; a pager call would key on ``(event.job_id, event.ordinal)``.
    """
    alerts.error(
        "ALERT: %s job %s dead-lettered on attempt %d (queue %s, by %s)",
        event.wire_name,
        event.job_id,
        event.attempt,
        event.queue,
        event.actor,
    )


# --- A workflow: a supplier's catalogue import --------------------------------------------------

SUPPLIERS = ("acme-tools", "nordic-home", "sunrise-garden")


@job("fetch-supplier-feed", queue="catalogue", max_attempts=3, backoff=[5, 30])
def fetch_supplier_feed(supplier: str, day: str) -> dict[str, Any]:
    return {"supplier": supplier, "day": day, "products": providers.supplier_feed(supplier, day)}


@job("import-products", queue="catalogue", takes_context=True)
def import_products(ctx: JobContext, supplier: str, feed_job_id: str) -> dict[str, Any]:
    """Import what the feed listed: the feed job's output, read as a parent's."""
    feed = ctx.parent_output(uuid.UUID(feed_job_id))
    if feed is None:
        raise LookupError(f"catalogue import of {supplier}: no output from feed job {feed_job_id}")
    return {"supplier": supplier, "imported": feed["products"]}


@job("resize-product-images", queue="catalogue", max_attempts=2, backoff=[10])
def resize_product_images(supplier: str, day: str) -> dict[str, Any]:
    return {"supplier": supplier, "resized": providers.supplier_feed(supplier, day) * 3}


@job("publish-catalogue", queue="catalogue")
def publish_catalogue(supplier: str, day: str) -> dict[str, Any]:
    return {"supplier": supplier, "day": day, "published": True}


def catalogue_import_name(supplier: str, day: str) -> str:
    return f"catalogue import {supplier} {day}"


def catalogue_import_key(supplier: str, day: str) -> str:
    """The workflow's key: one import per supplier and day (a second start is refused)."""
    return f"catalogue-import/{supplier}/{day}"


def prepare_catalogue_import(supplier: str, day: str, *, run_after: timedelta | None = None) -> list[NewJob]:
    """The import's four jobs, parents first: fetch → (import products, resize images) → publish."""
    feed = fetch_supplier_feed.using(run_after=run_after).prepare(supplier, day)
    products = import_products.using(parents=[feed.job_id]).prepare(supplier, str(feed.job_id))
    images = resize_product_images.using(parents=[feed.job_id]).prepare(supplier, day)
    publish = publish_catalogue.using(parents=[products.job_id, images.job_id]).prepare(supplier, day)
    return [feed, products, images, publish]


def start_catalogue_import(supplier: str, day: str, *, run_after: timedelta | None = None) -> uuid.UUID:
    """Store a supplier's import as one workflow (all four jobs or none); returns its id.

    Starting the same supplier and day twice raises ``WorkflowError`` (``DUPLICATE_WORKFLOW``).
    """
    name, key = catalogue_import_name(supplier, day), catalogue_import_key(supplier, day)
    with workflow(name, workflow_id=key) as wf:
        for prepared in prepare_catalogue_import(supplier, day, run_after=run_after):
            wf.add(prepared)
    return wf.workflow_id
