"""Settings for torture workers and clients: the test settings plus the torture app.

The database and the fast clocks come from the environment, exactly as for the worker tests
(``BACKWAVE_DB_NAME``, ``BACKWAVE_TEST_SETTINGS``, ``PGHOST``/``PGPORT``).
"""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS as _BASE_APPS

INSTALLED_APPS = [*_BASE_APPS, "tests.torture.apps.TortureConfig"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}},
    "loggers": {"backwave_django": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}
