"""Search finds what the console shows: the reads behind the job list's search box and the CLI's
``jobs --search`` and ``show`` (docs/admin.md, "Search"; docs/cli.md).

A search term is read as every needle it can be (:func:`needles`), and a job matches when it
matches any of them:

- a **full job id** (a UUID, with or without dashes): that job only;
- a **short id** as the console shows it, the last eight hex digits of the id with or without the
  leading ellipsis (``…b2c92a1a``, ``b2c92a1a``; ``admin/display.short_job_id``);
- a **sequence number** (what the job's page has in its URL);
- **argument values**, ``key=value``: the job's keyword argument ``key`` in its payload equals
  ``value`` (read as JSON when it is a number, ``true``/``false``/``null`` or a quoted string, and
  also as the text typed);
- **error text**: part of the job's terminal cause, and, for a viewer allowed the sensitive
  content (``failure_detail=True``), of the failure detail in its transition log;
- part of a **wire name** or of a **tag** value, or a tag as ``key:value``.

A full id, a short id written with its ellipsis and ``key=value`` are that needle only; any other
term is tried as every needle it can be (``12345678`` is a sequence number, a short id and text).

Costs. On PostgreSQL the short id and the arguments each use an index of their own (migration
0017), as long as the term is that needle only (a term tried as text too is a scan of the table,
as the wire-name match always was); elsewhere the short id is a scan of the id column and the
arguments a scan of the payloads of the newest :data:`SCAN_LIMIT` jobs only. Error text is a scan
of the newest :data:`SCAN_LIMIT` jobs on every database. A scan that stopped there says so in
:attr:`Search.notes`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast, Right

from ..database import jobs_database
from ..models import JobRecord, JobTag, JobTransition

#: The scans (error text everywhere, arguments outside PostgreSQL) read at most this many of the
#: newest jobs, so a search costs the same on a table of any size.
SCAN_LIMIT = 10_000
#: How many hex digits the console's short id shows (``admin/display.SHORT_ID_DIGITS``).
SHORT_ID_DIGITS = 8
#: A sequence number is a BIGINT.
_MAX_SEQUENCE = 2**63 - 1
_SHORT_ID = re.compile(rf"(?:…|\.\.\.)?([0-9a-fA-F]{{{SHORT_ID_DIGITS}}})")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Needles:
    """What a search term can be; each field None (or empty) when the term cannot be it."""

    term: str
    job_id: uuid.UUID | None = None
    short_id: str | None = None
    sequence: int | None = None
    argument: tuple[str, tuple[Any, ...]] | None = None
    tag: tuple[str, str] | None = None


def needles(term: str) -> Needles:
    """Every reading of ``term`` (stripped); a full job id is read as nothing else."""
    text = term.strip()
    try:
        return Needles(text, job_id=uuid.UUID(text))
    except ValueError:
        pass
    short = _SHORT_ID.fullmatch(text)
    sequence = int(text) if text.isdigit() and int(text) <= _MAX_SEQUENCE else None
    argument = None
    key, equals, value = text.partition("=")
    if equals and _KEY.fullmatch(key.strip()) and "__" not in key:
        argument = (key.strip(), argument_values(value.strip()))
    tag = None
    tag_key, colon, tag_value = text.partition(":")
    if colon and tag_key and tag_value:
        tag = (tag_key, tag_value)
    return Needles(
        text,
        short_id=short.group(1).lower() if short else None,
        sequence=sequence,
        argument=argument,
        tag=tag,
    )


def argument_values(text: str) -> tuple[Any, ...]:
    """The JSON values ``key=<text>`` matches: the text itself, and what it reads as in JSON
    when that is a number, a boolean or null; a quoted string is that string only."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return (text,)
    if isinstance(parsed, str):
        return (parsed,)
    if parsed is None or isinstance(parsed, bool | int | float):
        return (text, parsed)
    return (text,)


def short_id_of(jobs: QuerySet[Any]) -> QuerySet[Any]:
    """``jobs`` annotated with ``bw_short_id``, the last hex digits of the id as text.

    On PostgreSQL the expression is the one the ``backwave_job_short_id`` index is built on."""
    short = Right(Cast("job_id", output_field=TextField()), SHORT_ID_DIGITS)
    annotated: QuerySet[Any] = jobs.annotate(bw_short_id=short)
    return annotated


@dataclass(frozen=True)
class Search:
    """A search applied: the jobs it matches, and notes for the reader (a scan that stopped early)."""

    jobs: QuerySet[Any]
    notes: tuple[str, ...] = ()


def _scan_start(jobs: QuerySet[Any]) -> int | None:
    """The oldest ``sequence`` among the newest :data:`SCAN_LIMIT` jobs, or None when every job is."""
    newest = JobRecord.objects.using(jobs.db).order_by("-sequence").values_list("sequence", flat=True)
    found = list(newest[SCAN_LIMIT - 1 : SCAN_LIMIT])
    return found[0] if found else None


def _argument_condition(key: str, values: tuple[Any, ...], vendor: str) -> Q:
    """The payload's keyword argument ``key`` is one of ``values``."""
    condition = Q()
    for value in values:
        if vendor in ("postgresql", "mysql"):
            # ``payload -> 'kwargs' @> {key: value}`` (what the ``backwave_job_arguments`` index
            # serves on PostgreSQL; ``JSON_CONTAINS`` on MariaDB, which tells 42 from "42").
            condition |= Q(payload__kwargs__contains={key: value})
        else:
            # ``__exact`` last, so a key spelled like a lookup (``in``, ``contains``) stays a key.
            condition |= Q(**{f"payload__kwargs__{key}__exact": value})
    return condition


def _bounded(jobs: QuerySet[Any], scanned: Q, what: str) -> tuple[Q, tuple[str, ...]]:
    """``scanned`` limited to the newest :data:`SCAN_LIMIT` jobs, and the note saying so when
    there are more jobs than that."""
    start = _scan_start(jobs)
    if start is None:
        return scanned, ()
    note = (
        f"The {what} of the newest {SCAN_LIMIT:,} jobs only were searched (a scan, bounded so a "
        "search costs the same on any table); narrow the list with a filter to search older jobs."
    )
    return scanned & Q(pk__gte=start), (note,)


def search_jobs(jobs: QuerySet[Any], term: str, *, failure_detail: bool) -> Search:
    """``jobs`` narrowed to those ``term`` finds (see the module docstring); ``failure_detail``:
    whether the viewer may see failure detail, so whether it is searched.

    A full id, a short id written with its ellipsis and ``key=value`` are read as that needle
    only, so on PostgreSQL each is one index probe; any other term is tried as every needle it
    can be."""
    found = needles(term)
    if not found.term:
        return Search(jobs)
    if found.job_id is not None:
        return Search(jobs.filter(job_id=found.job_id))
    vendor = connections[jobs.db].vendor
    if found.argument is not None:
        key, values = found.argument
        condition = _argument_condition(key, values, vendor)
        if vendor == "postgresql":
            return Search(jobs.filter(condition))
        condition, notes = _bounded(jobs, condition, "arguments")
        return Search(jobs.filter(condition), notes)
    if found.short_id is not None:
        jobs = short_id_of(jobs)
        if found.term[:1] in ("…", "."):
            return Search(jobs.filter(bw_short_id=found.short_id))
    exact = Q(wire_name__icontains=found.term)
    tags = Q(value__icontains=found.term)
    if found.tag is not None:
        tags |= Q(key=found.tag[0], value=found.tag[1])
    exact |= Q(pk__in=JobTag.objects.using(jobs.db).filter(tags).values("job_id"))
    if found.sequence is not None:
        exact |= Q(pk=found.sequence)
    if found.short_id is not None:
        exact |= Q(bw_short_id=found.short_id)
    scanned = Q(terminal_cause__icontains=found.term)
    if failure_detail:
        details = JobTransition.objects.using(jobs.db).filter(
            job_id=OuterRef("pk"), failure_detail__icontains=found.term
        )
        scanned |= Q(Exists(details))
    scanned, notes = _bounded(jobs, scanned, "error text")
    return Search(jobs.filter(exact | scanned), notes)


@dataclass(frozen=True)
class Resolved:
    """What a job reference (``show X``) names: one job's id, or the candidates when it is ambiguous."""

    job_id: uuid.UUID | None
    candidates: tuple[tuple[uuid.UUID, int, str], ...] = ()


#: How many candidates an ambiguous reference lists.
CANDIDATES = 10


def resolve_job(reference: str) -> Resolved | None:
    """The job a reference names as the console shows it: a full id, a short id with or without
    the ellipsis, or a sequence number. None when the text is none of these; ``Resolved(None)``
    when it names no stored job; ``candidates`` (id, sequence, wire name) when it names several."""
    found = needles(reference)
    if found.job_id is not None:
        exists = JobRecord.objects.using(jobs_database()).filter(job_id=found.job_id).exists()
        return Resolved(found.job_id if exists else None)
    if found.short_id is None and found.sequence is None:
        return None
    jobs = JobRecord.objects.using(jobs_database()).all()
    condition = Q(pk__in=[])
    if found.short_id is not None:
        jobs = short_id_of(jobs)
        condition |= Q(bw_short_id=found.short_id)
    if found.sequence is not None:
        condition |= Q(pk=found.sequence)
    rows = list(
        jobs.filter(condition)
        .order_by("-sequence")
        .values_list("job_id", "sequence", "wire_name")[: CANDIDATES + 1]
    )
    if len(rows) == 1:
        return Resolved(rows[0][0])
    return Resolved(None, tuple(rows))


def search_notes(term: str, *, failure_detail: bool = False) -> tuple[str, ...]:
    """What a search for ``term`` says about itself (a scan that stopped at the newest jobs)."""
    return search_jobs(
        JobRecord.objects.using(jobs_database()).all(), term, failure_detail=failure_detail
    ).notes
