"""``OperatorAudit.action`` gains ``purge``: an operator's purge by retention (``operator.purge``,
``manage.py backwave purge``) is audited like every other operator action.

Only the field's choices change (no SQL on any database): the column already holds free text up
to 32 characters.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0013_awaiting_parent_index"),
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
                ],
                max_length=32,
            ),
        ),
    ]
