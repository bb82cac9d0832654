"""The failure tabs' index: newest first among Dead-Lettered and Quarantined jobs.

Additive: a partial index (on databases with partial indexes) that only the console's failure tabs
read, so workers of the previous release are unaffected while it builds.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0005_dashboard"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="jobrecord",
            index=models.Index(
                condition=models.Q(("state__in", [5, 6])),
                fields=["state", "-sequence"],
                name="backwave_job_failures",
            ),
        ),
    ]
