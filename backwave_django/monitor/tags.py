"""Tags as operators explore them: how many jobs carry each value of a key, and prefix suggestions.

:func:`tag_facet` counts, per value under one key (``""``: the labels), the jobs carrying it,
optionally among the jobs a :class:`~.jobs.JobQuery` selects; the most common first, ties in
code-point order. :func:`suggest_tags` completes a prefix over the labels, the keys and the values
of a key, for a search box; it is global (never narrowed by a filter) and pages by keyset.

Text is compared the same way on every database (:mod:`._sql`): values and keys are matched
exactly and ordered by their code points, and a suggestion prefix matches with ASCII letters
folded (``A`` to ``Z`` equal ``a`` to ``z``, nothing else folded). The prefix is a range of folded strings,
never a ``LIKE`` pattern, so ``%``, ``_``, ``[`` and ``\\`` in it are plain characters.

Costs (docs/monitor.md has the numbers at 1,000,000 jobs):

- :func:`tag_facet` is one ``GROUP BY`` over the tag rows under ``key``, read through the
  ``(key, value)`` index (with a base query, only the rows of the jobs it selects): it grows with
  the number of jobs tagged under the key. The console instead calls :func:`facet_sample`, the
  same counts among the newest :data:`FACET_SAMPLE` matching jobs only, in one query that costs
  the same on any table size.
- :func:`suggest_tags` on PostgreSQL walks the index ``backwave_tag_folded`` (migration 0012,
  ``key`` then the folded value then the value in code-point order) one probe per suggestion
  returned, skipping repeats, whatever the number of tag rows; the keys are found with one probe
  of ``backwave_tag_key_value`` per distinct key. On SQLite and MariaDB (no such index) it is one
  scan of the tag rows under the key, and one of the keyed rows for the keys.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, Count, Exists, F, OuterRef, QuerySet, Value
from django.db.models.expressions import RawSQL

from ..core.tags import TagPair
from ..database import jobs_database
from ..models import JobRecord, JobTag
from ._sql import Ordinal, SameText, fold, folded_sql, ordinal_sql, text
from .jobs import JobQuery, scoped_jobs

#: :func:`suggest_tags` returns at least one and at most this many suggestions per call.
MAX_SUGGESTIONS = 100
#: How many of the newest matching jobs :func:`facet_sample` counts the values of (the console's
#: tag facets).
FACET_SAMPLE = 1_000
#: Databases on which the suggestions walk the folded index (see the module docstring); tests
#: empty it to run the portable statement on PostgreSQL as well.
INDEX_WALK_VENDORS = frozenset({"postgresql"})


# --- Facets ----------------------------------------------------------------------------------


def _ranked(rows: QuerySet[Any], max_results: int | None) -> list[tuple[str, int]]:
    """``(value, jobs)`` per value of these tag rows: most jobs first, then values in code-point
    order; the first ``max_results`` (None: all). A job carries a (key, value) at most once (the
    unique constraint ``backwave_tag_unique``), so counting rows counts distinct jobs."""
    if max_results is not None and max_results <= 0:
        return []
    grouped = (
        rows.order_by()
        .annotate(token=Ordinal("value"))
        .values_list("token")
        .annotate(jobs=Count("*"))
        .order_by("-jobs", "token")
    )
    if max_results is not None:
        grouped = grouped[:max_results]
    return [(text(value), jobs) for value, jobs in grouped]


def _check_limit(max_results: object) -> int | None:
    if max_results is not None and (isinstance(max_results, bool) or not isinstance(max_results, int)):
        raise TypeError(f"max_results must be an int or None, got {max_results!r}")
    return max_results


def _under(key: object, using: str) -> QuerySet[JobTag]:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str (\"\" for the labels), got {type(key).__name__}")
    return JobTag.objects.using(using).filter(SameText(F("key"), Value(key)))


def tag_facet(
    key: str, base_query: JobQuery | None = None, max_results: int | None = None
) -> list[tuple[str, int]]:
    """``(value, jobs)`` for every value under ``key`` (``""``: the labels): how many distinct jobs
    carry it, most first, ties by value in code-point order, the first ``max_results`` of them
    (None: all; zero or less: none).

    ``base_query`` counts only the jobs it selects (its filters and tag predicates, as
    :func:`~.jobs.list_jobs` applies them; its paging fields are ignored). None, or a query with
    no filter, counts every job.
    """
    limit = _check_limit(max_results)
    if base_query is not None and not isinstance(base_query, JobQuery):
        raise TypeError(f"base_query must be a JobQuery or None, got {type(base_query).__name__}")
    rows = _under(key, jobs_database())
    if base_query is not None and base_query.filters_anything:
        rows = rows.filter(job_id__in=scoped_jobs(base_query).values("pk"))
    return _ranked(rows, limit)


def facet_sample(
    key: str, jobs: QuerySet[JobRecord], *, sample: int = FACET_SAMPLE, max_results: int | None = None
) -> list[tuple[str, int]]:
    """:func:`tag_facet`'s counts among the newest ``sample`` jobs of ``jobs`` that carry a tag under
    ``key``, for the console: one query whose cost does not grow with the table.

    The newest matching jobs are found by walking ``jobs`` newest first along the primary key,
    probing each job's tags, until ``sample`` match; then their tags under ``key`` are grouped.
    They sit in a derived table (``IN (SELECT * FROM (… LIMIT n))``) because MariaDB refuses a
    ``LIMIT`` directly inside ``IN (…)``.
    """
    limit = _check_limit(max_results)
    if isinstance(sample, bool) or not isinstance(sample, int):
        raise TypeError(f"sample must be an int, got {sample!r}")
    if sample <= 0:
        return []
    tags = _under(key, jobs.db)
    has_key = Exists(tags.filter(job_id=OuterRef("pk")))
    newest = jobs.prefetch_related(None).filter(has_key).order_by("-sequence").values("pk")[:sample]
    sql, params = newest.query.get_compiler(using=jobs.db).as_sql()
    chosen = RawSQL(f"SELECT * FROM ({sql}) newest", params, output_field=BigIntegerField())
    return _ranked(tags.filter(job_id__in=chosen), limit)


# --- Suggestions -----------------------------------------------------------------------------


def _prefix_end(prefix: str) -> str | None:
    """The least string after every string that starts with ``prefix`` (code-point order), or None."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop()) + 1
        if last <= 0x10FFFF:
            if 0xD800 <= last <= 0xDFFF:  # surrogates are never stored
                last = 0xE000
            return "".join(chars) + chr(last)
    return None


class _Statement:
    """The WHERE clause of a suggestion read, built for one database with its parameters."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.clauses: list[str] = []
        self.params: list[Any] = []

    def ordinal(self, sql: str) -> str:
        return ordinal_sql(self.vendor, sql)

    def folded(self, sql: str) -> str:
        return folded_sql(self.vendor, sql)

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    def same(self, column: str, value: str) -> None:
        """``column = value`` exactly (on MariaDB the bytes too, as :class:`._sql.SameText`)."""
        self.add(f"{column} = %s", value)
        if self.vendor == "mysql":
            self.add(f"{self.ordinal(column)} = {self.ordinal('%s')}", value)

    def starts_with(self, column: str, prefix: str) -> None:
        """The folded ``column`` starts with the (folded) ``prefix``: a range, no pattern."""
        if prefix:
            self.add(f"{self.folded(column)} >= {self.ordinal('%s')}", prefix)
            end = _prefix_end(prefix)
            if end is not None:
                self.add(f"{self.folded(column)} < {self.ordinal('%s')}", end)

    def after(self, column: str, token: str | None) -> None:
        """Strictly after ``token`` in suggestion order (folded, then code points)."""
        if token is not None:
            pair = f"({self.folded(column)}, {self.ordinal(column)})"
            self.add(f"{pair} > ({self.ordinal('%s')}, {self.ordinal('%s')})", fold(token), token)

    @property
    def where(self) -> str:
        return " AND ".join(self.clauses) or "1 = 1"


def _fetch(using: str, sql: str, params: list[Any]) -> list[Any]:
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return [text(row[0]) for row in cursor.fetchall()]


def _values(using: str, key: str, prefix: str, after: str | None, limit: int) -> list[str]:
    """The first ``limit`` distinct values under ``key`` starting with ``prefix`` (folded), after
    ``after``, in suggestion order."""
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(JobTag._meta.db_table)
    where = _Statement(vendor)
    where.same("t.key", key)
    where.starts_with("t.value", prefix)
    first = _Statement(vendor)
    first.after("t.value", after)
    order = f"{where.folded('t.value')}, {where.ordinal('t.value')}"
    if vendor not in INDEX_WALK_VENDORS:
        sql = (
            f"SELECT DISTINCT {where.ordinal('t.value')}, {where.folded('t.value')} FROM {table} t "
            f"WHERE {where.where} AND {first.where} ORDER BY 2, 1 LIMIT %s"
        )
        return _fetch(using, sql, [*where.params, *first.params, limit])
    # Each step finds the next distinct value with one probe of backwave_tag_folded, however many
    # jobs carry the value just found (a plain DISTINCT would read every one of their rows).
    token = "w.token"
    sql = (
        "WITH RECURSIVE walk(token, n) AS ("
        f"(SELECT {where.ordinal('t.value')}, 1 FROM {table} t WHERE {where.where} AND {first.where} "
        f"ORDER BY {order} LIMIT 1) "
        f"UNION ALL SELECT (SELECT {where.ordinal('t.value')} FROM {table} t WHERE {where.where} "
        f"AND ({where.folded('t.value')}, {where.ordinal('t.value')}) > "
        f"({where.folded(token)}, {where.ordinal(token)}) ORDER BY {order} LIMIT 1), w.n + 1 "
        "FROM walk w WHERE w.token IS NOT NULL AND w.n < %s"
        ") SELECT token FROM walk WHERE token IS NOT NULL"
    )
    return _fetch(using, sql, [*where.params, *first.params, *where.params, limit])


def _keys(using: str, prefix: str, after: str | None, limit: int) -> list[str]:
    """The first ``limit`` distinct keys starting with ``prefix`` (folded), after ``after``, in
    suggestion order. Every distinct key is read (keys are a small vocabulary), then sorted here."""
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(JobTag._meta.db_table)
    if vendor in INDEX_WALK_VENDORS:
        # One probe of backwave_tag_key_value per distinct key, in the column's own collation:
        # PostgreSQL's are deterministic, so every distinct key is visited.
        sql = (
            "WITH RECURSIVE walk(key) AS ("
            f"(SELECT t.key FROM {table} t WHERE t.key > '' ORDER BY t.key LIMIT 1) "
            f"UNION ALL SELECT (SELECT t.key FROM {table} t WHERE t.key > w.key ORDER BY t.key LIMIT 1) "
            "FROM walk w WHERE w.key IS NOT NULL"
            ") SELECT key FROM walk WHERE key IS NOT NULL"
        )
        keys = _fetch(using, sql, [])
    else:
        ordinal = ordinal_sql(vendor, "t.key")
        sql = f"SELECT DISTINCT {ordinal} FROM {table} t WHERE {ordinal} > {ordinal_sql(vendor, '%s')}"
        keys = _fetch(using, sql, [""])
    ranked = sorted((fold(key), key) for key in keys if fold(key).startswith(prefix))
    if after is not None:
        ranked = [order for order in ranked if order > (fold(after), after)]
    return [key for _, key in ranked[:limit]]


def _cursor(after: object, key: str | None) -> TagPair | None:
    if after is None:
        return None
    if (
        not isinstance(after, tuple | list)
        or len(after) != 2
        or not all(isinstance(part, str) for part in after)
    ):
        raise TypeError(f"after must be a (key, value) suggestion, got {after!r}")
    item = (after[0], after[1])
    if key is None:
        valid = (item[0] == "") != (item[1] == "")  # a label ("", value) or a key (key, "")
    else:
        valid = item[0] == key and item[1] != ""
    if not valid:
        raise ValueError(
            f"after must be a suggestion this call could have returned (stage key {key!r}), got {after!r}"
        )
    return item


def suggest_tags(
    prefix: str = "", key: str | None = None, after: TagPair | None = None, max_results: int = 50
) -> list[TagPair]:
    """Tags starting with ``prefix`` (ASCII letters folded; taken literally), as ``(key, value)``.

    - ``key=None``: the labels whose value matches, as ``("", value)``, then the keys that match,
      as ``(key, "")``.
    - ``key=k``: the distinct values under ``k`` that match, as ``(k, value)`` (``k=""``: labels).

    Within each block: by the folded token, then the token's code points (``ACME`` before
    ``Acme``); each suggestion once, in its stored casing. ``after`` is the last suggestion of the
    previous page: the next page starts strictly after it (across the labels-to-keys boundary
    too). ``max_results`` is clamped to 1…:data:`MAX_SUGGESTIONS`.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str or None, got {type(key).__name__}")
    if isinstance(max_results, bool) or not isinstance(max_results, int):
        raise TypeError(f"max_results must be an int, got {max_results!r}")
    limit = min(max(max_results, 1), MAX_SUGGESTIONS)
    cursor = _cursor(after, key)
    folded = fold(prefix)
    using = jobs_database()
    after_value = None if cursor is None else cursor[1]
    if key is not None:
        return [(key, value) for value in _values(using, key, folded, after_value, limit)]
    found: list[TagPair] = []
    if cursor is None or cursor[0] == "":
        found = [("", value) for value in _values(using, "", folded, after_value, limit)]
    if len(found) < limit:
        after_key = cursor[0] if cursor is not None and cursor[0] else None
        found += [(name, "") for name in _keys(using, folded, after_key, limit - len(found))]
    return found
