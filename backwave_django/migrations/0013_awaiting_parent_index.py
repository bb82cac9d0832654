"""The Awaiting Parent jobs per queue: a partial index the metrics count through.

Additive: a partial index (on databases with partial indexes) that only the metrics' periodic
count reads (docs/operations.md, "Metrics"), so that counting the live states never reads the
retained terminal rows. Built without blocking writes on PostgreSQL.
"""

from django.db import migrations, models

from ._operations import AddIndexWithoutBlocking


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0012_monitor_indexes"),
    ]

    operations = [
        AddIndexWithoutBlocking(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("state", 1)),
                fields=["queue"],
                name="backwave_job_awaiting",
            ),
        ),
    ]
