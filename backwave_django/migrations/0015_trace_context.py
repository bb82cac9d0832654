"""The trace context a job was enqueued under (docs/tracing.md).

Additive: `trace_context` is a nullable text column with no default, so adding it changes only the
catalog on PostgreSQL (no table rewrite, no scan, a brief lock to update the catalog), and rows
inserted by the previous release simply have none.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0014_operatoraudit_purge"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobrecord",
            name="trace_context",
            field=models.TextField(blank=True, null=True),
        ),
    ]
