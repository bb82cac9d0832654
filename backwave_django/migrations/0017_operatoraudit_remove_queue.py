"""``OperatorAudit.action`` gains ``remove_queue``: removing a queue's settings row (a queue that
holds no jobs) is audited like every other operator action (``operator.remove_queue``,
``manage.py backwave queues remove``, the Queues page's Remove button).

Only the field's choices change (no SQL on any database): the column already holds free text up
to 32 characters.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0016_transition_log_without_constraint"),
    ]

    operations = [
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
                ],
                max_length=32,
            ),
        ),
    ]
