"""Priority within a queue and unique jobs.

UPGRADE-PLAN: additive but for one index. `priority` is NOT NULL with a database default (0), so
rows inserted by the previous release get it, and on PostgreSQL adding it changes only the
catalog. `unique_key` is nullable. The claim index gains `priority` as its second key: the new
index is built first and the old one (`backwave_job_claim`) dropped after, both without blocking
writes on PostgreSQL (CONCURRENTLY, hence `atomic = False`); workers of the previous release keep
claiming correctly meanwhile (their query can still use the new index, less directly). See
docs/upgrading.md.
"""

from django.db import migrations, models

from ._operations import AddIndexWithoutBlocking, RemoveIndexWithoutBlocking


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0008_job_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobrecord",
            name="priority",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="jobrecord",
            name="unique_key",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        AddIndexWithoutBlocking(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("state", 0)),
                fields=["queue", "-priority", "due_time", "sequence"],
                name="backwave_job_claim_priority",
            ),
        ),
        RemoveIndexWithoutBlocking(
            model_name="jobrecord",
            name="backwave_job_claim",
        ),
        AddIndexWithoutBlocking(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("unique_key__isnull", False)),
                fields=["unique_key", "enqueued_at"],
                name="backwave_job_unique",
            ),
        ),
        migrations.CreateModel(
            name="UniqueKeyLock",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=64, unique=True)),
            ],
            options={
                "verbose_name": "unique-key lock",
                "default_permissions": (),
            },
        ),
    ]
