"""The indexes the job search uses on PostgreSQL, built without blocking writes.

``backwave_job_short_id``: the last eight hex digits of the job id as text, the short id the
console shows (``…b2c92a1a``), so a search by short id is one index probe instead of a scan of
every id. ``backwave_job_arguments``: a GIN index over the payload's keyword arguments
(``payload -> 'kwargs'``, ``jsonb_path_ops``), so a search ``key=value`` is a containment probe
(``@>``) on any table size. The expressions are the ones ``monitor/search.py`` writes (Django's
``Right(Cast(job_id, text), 8)`` and ``payload__kwargs__contains``); they must stay identical for
the planner to use the indexes.

Not model indexes: MariaDB cannot index an expression, and GIN is PostgreSQL's own. SQLite and
MariaDB get none here; their searches scan (the arguments only among the newest jobs, and the
search says so). Built with ``CREATE INDEX CONCURRENTLY`` (hence ``atomic = False``). Additive:
the previous release runs unchanged against the new schema; each enqueue writes one entry more
in each index.
"""

from django.db import migrations

JOBS = "backwave_django_jobrecord"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS backwave_job_short_id ON {JOBS} ((right(job_id::text, 8)))"
        )
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS backwave_job_arguments ON {JOBS} "
            "USING gin ((payload -> 'kwargs') jsonb_path_ops)"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS backwave_job_arguments")
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS backwave_job_short_id")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0017_operatoraudit_remove_queue"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
