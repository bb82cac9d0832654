"""Operator overrides of flow-control limits: set one, clear one (docs/flow-control.md, "Overrides").

An override is stored on the limit's ``LimitSettings`` row and wins over the declared bounds while
it is set (``core.limits.in_force``); the next claim reads it. Each change writes its one
``OperatorAudit`` row (``set_limit`` / ``clear_limit``, the target the limit's name) in the same
transaction. Overriding a limit no worker has declared yet is allowed and in force at once: the
row is created for it.
"""

from __future__ import annotations

import enum
from datetime import datetime

from django.db import IntegrityError, transaction

from ..core.limits import LimitValues
from ..core.states import ClearLimitResult, OperatorAction
from ..core.validation import require_actor, require_aware, validate_queue_name
from ..database import jobs_database
from ..models import LimitSettings
from ._tx import atomic_retrying, audit

#: The largest concurrency or rate the columns hold on every supported database (32-bit signed).
MAX_BOUND = 2**31 - 1


class Keep(enum.Enum):
    """The value of a bound left as it is in force now (an argument the caller did not give)."""

    KEEP = "keep"


#: Keep this bound as it is in force (see :func:`set_limit`).
KEEP = Keep.KEEP


def _bound(name: str, value: int | Keep | None, current: int | None) -> int | None:
    if value is KEEP:
        return current
    if value is not None and not isinstance(value, bool) and isinstance(value, int) and value > MAX_BOUND:
        raise ValueError(f"{name} must be at most {MAX_BOUND:,}, got {value!r}")
    return value


def merged_values(
    current: LimitValues | None,
    concurrency: int | Keep | None,
    rate: int | Keep | None,
    period: float | Keep,
) -> LimitValues:
    """The bounds ``set_limit`` stores: each given one as given (None removes it), each :data:`KEEP`
    one as ``current`` has it (no bound, and a period of 1 s, when nothing is in force yet).
    ``ValueError`` when no bound remains or one is out of range."""
    return LimitValues(
        _bound("concurrency", concurrency, current.concurrency if current else None),
        _bound("rate", rate, current.rate if current else None),
        (current.period if current else 1.0) if period is KEEP else period,
    )


def _locked_row(using: str, name: str, *, create: bool) -> LimitSettings | None:
    """The limit's settings row, locked; created first when missing and ``create``."""
    rows = LimitSettings.objects.using(using).select_for_update()
    row = rows.filter(name=name).first()
    if row is None and create:
        try:
            with transaction.atomic(using=using):
                LimitSettings.objects.using(using).create(name=name)
        except IntegrityError:  # a worker declared it meanwhile: lock the row it wrote
            pass
        row = rows.filter(name=name).first()
    return row


def set_limit(
    name: str,
    *,
    concurrency: int | Keep | None = KEEP,
    rate: int | Keep | None = KEEP,
    period: float | Keep = KEEP,
    actor: str,
    now: datetime,
) -> LimitValues:
    """Override limit ``name`` cluster-wide with these bounds; the bounds now in force.

    A bound given as :data:`KEEP` keeps its value in force now (the override's, else the
    declared one); None removes the bound; at least one of ``concurrency`` and ``rate`` must
    remain. The limit need not be declared yet. Always audited (``set_limit``).
    """
    validate_queue_name(name, "limit name")
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()

    def body() -> LimitValues:
        row = _locked_row(using, name, create=True)
        assert row is not None
        values = merged_values(row.values_in_force(), concurrency, rate, period)
        LimitSettings.objects.using(using).filter(pk=row.pk).update(
            overridden=True,
            override_concurrency=values.concurrency,
            override_rate=values.rate,
            override_period=values.period,
            overridden_by=actor,
            overridden_at=now,
        )
        audit(using, actor, OperatorAction.SET_LIMIT, name, now)
        return values

    # Bad bounds raise inside the transaction, before the update: it rolls back whole (the row it
    # may have created too), so nothing is written and nothing audited.
    return atomic_retrying(using, body)


def clear_limit(name: str, *, actor: str, now: datetime) -> ClearLimitResult:
    """Remove the override of limit ``name``: the declared bounds apply again.

    ``NOT_OVERRIDDEN`` when no override is set and ``UNKNOWN_LIMIT`` when nothing declares or
    overrides the limit (nothing changed, nothing audited); ``CLEARED`` is audited
    (``clear_limit``). The row of a limit no worker declares goes with its override.
    """
    validate_queue_name(name, "limit name")
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()

    def body() -> ClearLimitResult:
        row = _locked_row(using, name, create=False)
        if row is None or (not row.overridden and row.declared_values() is None):
            return ClearLimitResult.UNKNOWN_LIMIT
        if not row.overridden:
            return ClearLimitResult.NOT_OVERRIDDEN
        rows = LimitSettings.objects.using(using).filter(pk=row.pk)
        if row.declared_values() is None:
            rows.delete()
        else:
            rows.update(
                overridden=False,
                override_concurrency=None,
                override_rate=None,
                override_period=None,
                overridden_by=None,
                overridden_at=None,
            )
        audit(using, actor, OperatorAction.CLEAR_LIMIT, name, now)
        return ClearLimitResult.CLEARED

    return atomic_retrying(using, body)
