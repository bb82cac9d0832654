"""The indexes observers and workflows read, built without blocking writes on PostgreSQL.

- ``backwave_job_workflow``: a workflow's members (partial: jobs in a workflow only).
- ``backwave_transition_position``: the log in delivery order. On PostgreSQL it is partial
  (numbered entries only), so inserting a transition costs nothing extra while no observer runs;
  elsewhere it is a plain unique index, whose NULL entries are how the sequencer finds the
  entries still to number.
- PostgreSQL only: ``JobTransition.tx_id``, the inserting transaction's id (``pg_current_xact_id``),
  set by a column default on new rows only (existing rows keep NULL: no table rewrite), and a BRIN
  index on it. The sequencer numbers entries whose transaction ended, found through it (see
  docs/observers.md). The column is not a model field: only the sequencer's SQL reads it.
"""

from django.db import migrations, models

from ._operations import AddIndexWithoutBlocking

TRANSITIONS = "backwave_django_jobtransition"


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TRANSITIONS} ADD COLUMN IF NOT EXISTS tx_id bigint")
        schema_editor.execute(
            f"ALTER TABLE {TRANSITIONS} ALTER COLUMN tx_id SET DEFAULT (pg_current_xact_id()::text::bigint)"
        )
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS backwave_transition_tx ON {TRANSITIONS} "
            "USING brin (tx_id) WITH (pages_per_range = 16, autosummarize = on)"
        )
        schema_editor.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS backwave_transition_position ON {TRANSITIONS} "
            "(position) WHERE position IS NOT NULL"
        )
    else:
        schema_editor.execute(f"CREATE UNIQUE INDEX backwave_transition_position ON {TRANSITIONS} (position)")


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS backwave_transition_position")
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS backwave_transition_tx")
        schema_editor.execute(f"ALTER TABLE {TRANSITIONS} DROP COLUMN IF EXISTS tx_id")
    elif vendor == "mysql":
        schema_editor.execute(f"DROP INDEX backwave_transition_position ON {TRANSITIONS}")
    else:
        schema_editor.execute("DROP INDEX backwave_transition_position")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0010_observers_and_workflows"),
    ]

    operations = [
        AddIndexWithoutBlocking(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("workflow_id__isnull", False)),
                fields=["workflow_id", "sequence"],
                name="backwave_job_workflow",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
