"""Text comparisons the monitor's reads share, the same on every database whatever its collation.

A database's collation decides how text compares, and the defaults disagree: PostgreSQL's may be
linguistic (``en_US.UTF-8`` sorts ``a`` beside ``A``), MariaDB's ignore case and accents
(``'ACME' = 'acme'``) and pad with spaces. The monitor promises one order and exact matches on all
three, so every comparison of stored text it makes goes through these pieces:

- :class:`Ordinal`: the text compared by its code points, which is the byte order of its UTF-8
  form (PostgreSQL ``COLLATE "C"``, SQLite ``COLLATE BINARY``, MariaDB ``CAST(… AS BINARY)``);
- :func:`folded_sql`: the text with ASCII ``A`` to ``Z`` folded to ``a`` to ``z`` and nothing
  else folded, compared like :class:`Ordinal` (PostgreSQL ``translate``; elsewhere nested
  ``REPLACE`` calls, which are byte-exact on SQLite and on binary strings on MariaDB);
- :class:`SameText`: exact equality (on MariaDB also the bytes, so ``'ACME' <> 'acme'``; the
  plain ``=`` stays in front so the column's index still finds the rows).

On MariaDB :class:`Ordinal` and :func:`folded_sql` yield bytes: :func:`text` turns them back into
strings. :func:`ordinal_sql` is :class:`Ordinal`'s SQL as a string, for the raw statements of
:mod:`.tags`, which also use :func:`folded_sql`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, CharField, Func

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
#: ``str.translate`` table of the ASCII fold (the Python side of :func:`folded_sql`).
ASCII_FOLD = str.maketrans(UPPER, LOWER)


def fold(text: str) -> str:
    """``text`` with ASCII ``A`` to ``Z`` folded to ``a`` to ``z``; every other character kept."""
    return text.translate(ASCII_FOLD)


def ordinal_sql(vendor: str, sql: str) -> str:
    """SQL for ``sql`` (a text expression) compared by code points on ``vendor``."""
    if vendor == "postgresql":
        return f'({sql}) COLLATE "C"'
    if vendor == "mysql":
        return f"CAST({sql} AS BINARY)"
    return f"({sql}) COLLATE BINARY"


def folded_sql(vendor: str, sql: str) -> str:
    """SQL for ``sql`` ASCII-folded and compared by code points on ``vendor``.

    On PostgreSQL this is exactly the expression of the index ``backwave_tag_folded`` (migration
    0012) once ``sql`` is the column ``value``, so the suggestions walk that index.
    """
    if vendor == "postgresql":
        return f"translate({sql}, '{UPPER}', '{LOWER}') COLLATE \"C\""
    folded = ordinal_sql(vendor, sql) if vendor == "mysql" else sql
    for upper, lower in zip(UPPER, LOWER, strict=True):
        folded = f"REPLACE({folded}, '{upper}', '{lower}')"
    return folded if vendor == "mysql" else f"{folded} COLLATE BINARY"


def text(value: Any) -> Any:
    """A value read through :class:`Ordinal` or :func:`folded_sql`: bytes (MariaDB) decoded."""
    if isinstance(value, memoryview):
        value = value.tobytes()
    return value.decode() if isinstance(value, bytes | bytearray) else value


class Ordinal(Func):
    """A text expression compared by its code points (UTF-8 byte order) on every database."""

    arity = 1
    output_field = CharField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> Any:  # type: ignore[override]
        sql, params = compiler.compile(self.source_expressions[0])
        return ordinal_sql(connection.vendor, sql), params


class SameText(Func):
    """``lhs = rhs`` exactly, usable in ``filter()``: on MariaDB the bytes must match too."""

    arity = 2
    conditional = True
    output_field = BooleanField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> Any:  # type: ignore[override]
        (lhs, lhs_params), (rhs, rhs_params) = (compiler.compile(e) for e in self.source_expressions)
        if connection.vendor == "mysql":
            sql = f"({lhs} = {rhs} AND {ordinal_sql('mysql', lhs)} = {ordinal_sql('mysql', rhs)})"
            return sql, (*lhs_params, *rhs_params, *lhs_params, *rhs_params)
        return f"({lhs} = {rhs})", (*lhs_params, *rhs_params)
