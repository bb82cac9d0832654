"""The index the monitor's tag suggestions walk, built without blocking writes (PostgreSQL only).

``backwave_tag_folded`` on the tag table: ``key``, then the value with ASCII letters folded to
lower case, then the value itself, both in code-point order (``COLLATE "C"``). That is exactly the
order ``monitor.suggest_tags`` returns (backwave_django/monitor/tags.py): with it, a page of
suggestions is one index probe per suggestion, skipping over every other job that carries the same
value. Without it each page reads (and sorts) every tag row under the key, which at a million jobs
means hundreds of thousands of rows per keystroke for a common key or the labels. The existing
``(key, value)`` index cannot serve: it is in the database's collation, which may not be
code-point order and never folds case.

The expression is the one ``monitor._sql.folded_sql`` writes for PostgreSQL; the two must stay
identical for the planner to use the index. It is not a model index (Django cannot declare an
expression with a collation portably): SQLite and MariaDB get no index here (MariaDB cannot index
an expression), and their suggestions scan the tag rows under the key. Built with
``CREATE INDEX CONCURRENTLY`` (hence ``atomic = False``), so enqueues keep writing tags while a
large table is indexed; it adds one index entry per tag row written from then on.
"""

from django.db import migrations

TAGS = "backwave_django_jobtag"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS backwave_tag_folded ON {TAGS} "
            f"(key, (translate(value, '{UPPER}', '{LOWER}') COLLATE \"C\"), (value COLLATE \"C\"))"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS backwave_tag_folded")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0011_transition_positions"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
