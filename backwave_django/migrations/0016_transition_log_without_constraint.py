"""The transition log keeps its relation to the job, without a constraint in the database.

Every entry is written by the store in the statement that inserts or updates its job row, from
that statement's own rows, so the deferred check PostgreSQL ran for each entry at commit (an index
probe and a row lock on the job) proved nothing the statement had not; it cost about a fifth of
PostgreSQL's work per processed job and of a bulk enqueue's statement and commit
(docs/performance.md, "The transition log's foreign key"). Entries still go with their job:
Django's ``CASCADE`` deletes them, in the purge and in any other delete of job rows through Django.

Additive: dropping a foreign-key constraint takes a brief lock on both tables on PostgreSQL and
MariaDB and reads no rows. SQLite keeps its constraint (its check is a cheap in-process lookup,
and dropping it would copy the whole table; see ``AlterFieldOutsideSQLite``). The previous
release writes the same rows and runs unchanged against the new schema.
"""

import django.db.models.deletion
from django.db import migrations, models

from ._operations import AlterFieldOutsideSQLite


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0015_trace_context"),
    ]

    operations = [
        AlterFieldOutsideSQLite(
            model_name="jobtransition",
            name="job",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="transitions",
                to="backwave_django.jobrecord",
            ),
        ),
    ]
