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
        if _tasks_use_backwave():
            autodiscover_modules("tasks")  # and, with the Tasks backend, its Django @task functions


def _tasks_use_backwave() -> bool:
    """Whether ``settings.TASKS`` routes any backend to BackWave (Django 6.0+ only)."""
    from django.conf import settings

    backends = getattr(settings, "TASKS", None) or {}
    return any(
        str(options.get("BACKEND", "")).startswith("backwave_django.tasks.") for options in backends.values()
    )
