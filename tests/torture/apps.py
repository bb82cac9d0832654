"""The torture app: its ``jobs.py`` declares the handlers; in worker processes it installs patches."""

from __future__ import annotations

import os

from django.apps import AppConfig

#: Set by the runner in the environment of the worker processes it starts.
ROLE_ENV = "BACKWAVE_TORTURE_ROLE"
SABOTAGE_ENV = "BACKWAVE_TORTURE_SABOTAGE"
#: The chance that a worker delivers an outcome batch twice (see patches.py).
DUPLICATE_DELIVERY_ENV = "BACKWAVE_TORTURE_DUPLICATE_P"
#: Seconds a worker's clock runs off the true time (see patches.py): a host with another clock.
CLOCK_SKEW_ENV = "BACKWAVE_TORTURE_CLOCK_SKEW"


class TortureConfig(AppConfig):
    name = "tests.torture"
    label = "backwave_torture"
    verbose_name = "Torture suite"

    def ready(self) -> None:
        if os.environ.get(ROLE_ENV) == "worker":
            from .patches import install

            install(sabotage=os.environ.get(SABOTAGE_ENV, ""))
