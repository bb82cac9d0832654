"""A database router that keeps the job tables on a database of their own.

::

    DATABASE_ROUTERS = ["backwave_django.routers.JobsRouter"]
    BACKWAVE = {"DATABASE": "jobs"}  # an alias in DATABASES

Every model of ``backwave_django`` is then read and written on ``BACKWAVE["DATABASE"]``, and
migrated only there (``manage.py migrate backwave_django --database jobs``). Other apps' models
are left to the other routers. With ``DATABASE`` unset the router has no opinion at all.

A job enqueued inside ``transaction.atomic()`` on another alias is **not** part of that
transaction: it commits on the jobs' database at once. Only writes inside
``transaction.atomic(using="jobs")`` commit or roll back together with the enqueue. See
docs/operations.md, "The job tables on their own database".
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from .conf import resolved_settings

APP_LABEL = "backwave_django"


class JobsRouter:
    """Routes the app's models to ``BACKWAVE["DATABASE"]``; says nothing about any other model."""

    def _alias(self) -> str | None:
        # Resolved without raising: an unrelated bad BACKWAVE key must not break routing for the
        # whole project (``manage.py check`` reports it as backwave.E001).
        return resolved_settings().database

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return self._alias() if model._meta.app_label == APP_LABEL else None

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return self._alias() if model._meta.app_label == APP_LABEL else None

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        if obj1._meta.app_label == APP_LABEL and obj2._meta.app_label == APP_LABEL:
            return True
        return None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        alias = self._alias()
        if app_label != APP_LABEL or alias is None:
            return None
        return db == alias
