"""Flow control (docs/flow-control.md): limits, their usage, and each job's partition, buckets and lane.

UPGRADE-PLAN: additive but for one index. Four new tables; three nullable or database-defaulted
columns on the jobs and the schedules (so adding them rewrites nothing and the previous release's
inserts store plain jobs); and the claim index reshaped to lead with the lane:
``backwave_job_claim`` on (queue, lane, priority DESC, due_time, sequence) of every Scheduled job
replaces ``backwave_job_claim_priority``, so a saturated bucket's held jobs are never stepped over
by the claims of other lanes or of plain jobs (lane 0). The new index is built before the old one is
dropped, so claims always have an index; both without blocking writes on PostgreSQL (MariaDB,
without partial indexes, has neither). Workers of the previous release keep claiming correctly
meanwhile, in the same order (every job they know is lane 0).
"""

from django.db import migrations, models

from ._operations import AddIndexWithoutBlocking, RemoveIndexWithoutBlocking


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("backwave_django", "0018_search_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="LimitBucket",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=128)),
                ("bucket", models.CharField(max_length=200)),
            ],
        ),
        migrations.CreateModel(
            name="LimitLease",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=128)),
                ("bucket", models.CharField(max_length=200)),
                ("job", models.BigIntegerField()),
                ("acquired_at", models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name="LimitSettings",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=128, unique=True)),
                ("declared_concurrency", models.PositiveIntegerField(blank=True, null=True)),
                ("declared_rate", models.PositiveIntegerField(blank=True, null=True)),
                ("declared_period", models.FloatField(blank=True, null=True)),
                ("declared_at", models.DateTimeField(blank=True, null=True)),
                ("overridden", models.BooleanField(default=False)),
                ("override_concurrency", models.PositiveIntegerField(blank=True, null=True)),
                ("override_rate", models.PositiveIntegerField(blank=True, null=True)),
                ("override_period", models.FloatField(blank=True, null=True)),
                ("overridden_by", models.CharField(blank=True, max_length=255, null=True)),
                ("overridden_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "limit",
                "verbose_name_plural": "limits",
                "permissions": [("change_limits", "Can override and clear flow-control limits")],
            },
        ),
        migrations.CreateModel(
            name="LimitStart",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=128)),
                ("bucket", models.CharField(max_length=200)),
                ("started_at", models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name="jobrecord",
            name="lane",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="jobrecord",
            name="limit_keys",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="jobrecord",
            name="partition",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="recurringschedule",
            name="lane",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="recurringschedule",
            name="limit_keys",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="recurringschedule",
            name="partition",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AlterField(
            model_name="operatoraudit",
            name="action",
            field=models.CharField(
                choices=[
                    ("cancel", "Cancel"),
                    ("requeue", "Requeue"),
                    ("trigger_schedule", "Trigger schedule"),
                    ("pause_queue", "Pause queue"),
                    ("resume_queue", "Resume queue"),
                    ("set_concurrency_limit", "Set concurrency limit"),
                    ("save_schedule", "Save schedule"),
                    ("remove_schedule", "Remove schedule"),
                    ("retry_now", "Retry now"),
                    ("purge", "Purge by retention"),
                    ("remove_queue", "Remove queue settings"),
                    ("set_limit", "Override limit"),
                    ("clear_limit", "Clear limit override"),
                ],
                max_length=32,
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("state", 0)),
                fields=["queue", "lane", "-priority", "due_time", "sequence"],
                name="backwave_job_claim",
            ),
        ),
        RemoveIndexWithoutBlocking(
            model_name="jobrecord",
            name="backwave_job_claim_priority",
        ),
        migrations.AddConstraint(
            model_name="limitbucket",
            constraint=models.UniqueConstraint(
                fields=("name", "bucket"), name="backwave_limit_bucket_unique"
            ),
        ),
        migrations.AddIndex(
            model_name="limitlease",
            index=models.Index(fields=["name", "bucket"], name="backwave_limit_lease_bucket"),
        ),
        migrations.AddIndex(
            model_name="limitlease",
            index=models.Index(fields=["job"], name="backwave_limit_lease_job"),
        ),
        migrations.AddIndex(
            model_name="limitstart",
            index=models.Index(fields=["name", "bucket", "started_at"], name="backwave_limit_start_window"),
        ),
    ]
