"""PostgreSQL: vacuum the job tables early.

Every claim and every outcome leaves a dead row version behind (and a dead entry in the claim
index), so a busy queue table accumulates dead tuples far faster than the default thresholds
(20 % of the table) expect; until they are vacuumed, each claim wades through them. These
per-table settings make autovacuum visit the tables after about 1,000 changes plus 2 %.
"""

from django.db import migrations

TABLES = ("backwave_django_jobrecord", "backwave_django_jobtransition")
OPTIONS = (
    "autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, "
    "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02"
)


def tune(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {table} SET ({OPTIONS})")


def untune(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    names = ", ".join(option.split("=")[0].strip() for option in OPTIONS.split(","))
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {table} RESET ({names})")


class Migration(migrations.Migration):
    dependencies = [("backwave_django", "0002_workernode")]
    operations = [migrations.RunPython(tune, untune)]
