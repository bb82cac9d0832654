from __future__ import annotations

from django.apps import AppConfig


class BackWaveConfig(AppConfig):
    name = "backwave_django"
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from . import checks  # noqa: F401  (registers the system checks)

        autodiscover_modules("jobs")  # every installed app's jobs.py declares its @job handlers
