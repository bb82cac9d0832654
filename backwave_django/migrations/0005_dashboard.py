"""The Dashboard page's hook in the admin: a proxy model, so no table and no schema change."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("backwave_django", "0004_recurringschedule"),
    ]

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[],
            options={
                "verbose_name": "Dashboard",
                "verbose_name_plural": "Dashboard",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("backwave_django.queuesettings",),
        ),
    ]
