#!/usr/bin/env python
"""Check that backwave_django's migrations are additive, and that the models and migrations agree.

    .venv/bin/python scripts/check_migrations.py

During an upgrade the previous release's workers keep running while ``migrate`` runs (see
docs/upgrading.md), so every migration must leave the old code working: it may add tables,
nullable columns, columns with a database default, and indexes, but it may not

- drop or rename a table or a column (``DeleteModel``, ``RemoveField``, ``RenameModel``,
  ``RenameField``): old code still reads and writes them;
- add a column that is NOT NULL without a ``db_default``: old code inserts rows without it
  (Django's ``default=`` lives in Python only, the old code never sets it);
- narrow a column (``AlterField`` to another type, from NULL to NOT NULL, or to a shorter
  ``max_length``): values old code writes may no longer fit.

A migration that must do one of these anyway carries a documented plan: a line starting with
``UPGRADE-PLAN:`` in its module docstring (or an ``upgrade_plan`` text attribute on its
``Migration`` class) that says how the release stays safe, e.g. "UPGRADE-PLAN: column unused since 0.3 (see
docs/upgrading.md#removing-a-column)". The check lists such migrations instead of failing.

Then it runs ``makemigrations --check --dry-run``, which fails when a model change has no migration.
Exits 0 when both pass, 1 otherwise. Needs no database server (it uses tests.settings on SQLite
in memory unless DJANGO_SETTINGS_MODULE / BACKWAVE_TEST_DB say otherwise).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP = "backwave_django"
PLAN_MARKER = "UPGRADE-PLAN:"


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("BACKWAVE_TEST_DB", "sqlite")
    if os.environ["BACKWAVE_TEST_DB"] == "sqlite":
        os.environ.setdefault("BACKWAVE_DB_NAME", ":memory:")
    import django

    django.setup()


def upgrade_plan(migration: Any, docstring: str | None) -> str | None:
    """The documented plan of a migration that is not additive, or ``None``.

    Either the ``Migration`` class's ``upgrade_plan`` text, or the rest of a docstring line that
    starts with ``UPGRADE-PLAN:``. An empty plan is no plan.
    """
    attribute = str(getattr(migration, "upgrade_plan", "") or "").strip()
    if attribute.startswith(PLAN_MARKER):
        attribute = attribute[len(PLAN_MARKER) :].strip()
    if attribute:
        return attribute
    for line in (docstring or "").splitlines():
        stripped = line.strip()
        if stripped.startswith(PLAN_MARKER) and stripped[len(PLAN_MARKER) :].strip():
            return stripped[len(PLAN_MARKER) :].strip()
    return None


def _database_operations(operations: Iterable[Any]) -> Iterable[Any]:
    """The operations that touch the database (state-only halves are harmless to old code)."""
    from django.db import migrations

    for operation in operations:
        if isinstance(operation, migrations.SeparateDatabaseAndState):
            yield from _database_operations(operation.database_operations)
        else:
            yield operation


def operation_problems(operation: Any, state: Any, app_label: str = APP) -> list[str]:
    """Why one operation is not additive, judged against the project state before it runs."""
    from django.db import migrations
    from django.db.models import NOT_PROVIDED

    problems: list[str] = []
    if isinstance(operation, migrations.DeleteModel):
        problems.append(f"drops the table of model {operation.name}")
    elif isinstance(operation, migrations.RemoveField):
        problems.append(f"drops column {operation.model_name}.{operation.name}")
    elif isinstance(operation, migrations.RenameModel):
        problems.append(f"renames model {operation.old_name} to {operation.new_name}")
    elif isinstance(operation, migrations.RenameField):
        problems.append(
            f"renames column {operation.model_name}.{operation.old_name} to {operation.new_name}"
        )
    elif isinstance(operation, migrations.AddField):
        field = operation.field
        if (
            not field.null
            and not field.many_to_many
            and getattr(field, "db_default", NOT_PROVIDED) is NOT_PROVIDED
        ):
            problems.append(
                f"adds NOT NULL column {operation.model_name}.{operation.name} without a db_default "
                "(rows inserted by the previous release would fail); make it null=True or give it "
                "a db_default"
            )
    elif isinstance(operation, migrations.AlterField):
        model_state = state.models.get((app_label, operation.model_name_lower))
        old = model_state.fields.get(operation.name) if model_state is not None else None
        new = operation.field
        where = f"{operation.model_name}.{operation.name}"
        if old is None:
            problems.append(f"alters {where}, which the previous state does not have")
        else:
            if type(old) is not type(new):
                problems.append(
                    f"changes the type of {where} from {type(old).__name__} to {type(new).__name__}"
                )
            if old.null and not new.null:
                problems.append(f"makes {where} NOT NULL")
            old_length, new_length = getattr(old, "max_length", None), getattr(new, "max_length", None)
            if old_length is not None and new_length is not None and new_length < old_length:
                problems.append(f"shortens {where} from max_length {old_length} to {new_length}")
    return problems


def migration_problems(migration: Any, state: Any, docstring: str | None) -> tuple[list[str], str | None]:
    """(the non-additive operations of a migration, its documented plan if it has one)."""
    problems: list[str] = []
    for operation in _database_operations(migration.operations):
        problems.extend(operation_problems(operation, state, migration.app_label))
    return problems, upgrade_plan(migration, docstring)


def check_additive() -> list[str]:
    """Audit every migration of the app; returns the failures (plans are printed, not failed)."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    failures: list[str] = []
    names = sorted(name for app, name in loader.disk_migrations if app == APP)
    for name in names:
        migration = loader.disk_migrations[(APP, name)]
        state = loader.project_state((APP, name), at_end=False)
        docstring = sys.modules[type(migration).__module__].__doc__
        problems, plan = migration_problems(migration, state, docstring)
        if not problems:
            print(f"  ok       {APP}.{name}")
        elif plan:
            print(f"  planned  {APP}.{name}: {'; '.join(problems)} -- plan: {plan}")
        else:
            print(f"  FAILED   {APP}.{name}: {'; '.join(problems)}")
            failures.extend(f"{APP}.{name} {problem}" for problem in problems)
    return failures


def check_models_match_migrations() -> bool:
    from django.core.management import call_command

    try:
        call_command("makemigrations", APP, "--check", "--dry-run", verbosity=1)
    except SystemExit as exit_:
        return exit_.code in (0, None)
    return True


def main() -> int:
    _setup()
    print(f"Migrations of {APP} are additive (no drops, renames or narrowing without an {PLAN_MARKER}):")
    failures = check_additive()
    print(f"Models and migrations agree (makemigrations {APP} --check --dry-run):")
    in_sync = check_models_match_migrations()
    if failures:
        print(
            f"\n{len(failures)} non-additive operation(s). The previous release's workers keep running "
            "during migrate, so split the change (add now, remove in a later release) or document the plan "
            f"with an '{PLAN_MARKER}' line in the migration's docstring (see docs/upgrading.md).",
            file=sys.stderr,
        )
    if not in_sync:
        print(
            f"\nThe models have changes without a migration: run `manage.py makemigrations {APP}`.",
            file=sys.stderr,
        )
    return 0 if not failures and in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
