"""Migrations: they match the models, and they stay additive (scripts/check_migrations.py)."""

import importlib.util
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader


@pytest.mark.django_db
def test_the_models_and_migrations_agree():
    call_command("makemigrations", "backwave_django", "--check", "--dry-run", verbosity=0)


# --- scripts/check_migrations.py: migrations stay additive ---------------------------------------

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_migrations.py"
_spec = importlib.util.spec_from_file_location("check_migrations", _SCRIPT)
assert _spec is not None
assert _spec.loader is not None
check_migrations = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_migrations)


def _latest_state():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    leaf = next(node for node in loader.graph.leaf_nodes() if node[0] == "backwave_django")
    return loader.project_state(leaf)


def _problems(*operations, docstring=None, **attributes):
    migration = type("Migration", (migrations.Migration,), {"operations": list(operations), **attributes})(
        "9999_probe", "backwave_django"
    )
    return check_migrations.migration_problems(migration, _latest_state(), docstring)


def test_the_shipped_migrations_are_additive():
    assert check_migrations.check_additive() == []


@pytest.mark.parametrize(
    ("operation", "problem"),
    [
        (migrations.RemoveField("jobrecord", "terminal_cause"), "drops column jobrecord.terminal_cause"),
        (migrations.DeleteModel("WorkerNode"), "drops the table of model WorkerNode"),
        (migrations.RenameField("jobrecord", "queue", "lane"), "renames column jobrecord.queue to lane"),
        (migrations.RenameModel("WorkerNode", "Node"), "renames model WorkerNode to Node"),
        (
            migrations.AddField("jobrecord", "priority", models.IntegerField(default=0)),
            "adds NOT NULL column jobrecord.priority without a db_default",
        ),
        (
            migrations.AlterField("jobrecord", "wire_name", models.CharField(max_length=100)),
            "shortens jobrecord.wire_name from max_length 255 to 100",
        ),
        (
            migrations.AlterField("jobrecord", "terminal_cause", models.TextField()),
            "makes jobrecord.terminal_cause NOT NULL",
        ),
        (
            migrations.AlterField("jobrecord", "attempt", models.CharField(max_length=10)),
            "changes the type of jobrecord.attempt from PositiveIntegerField to CharField",
        ),
        (
            migrations.SeparateDatabaseAndState(database_operations=[migrations.RemoveField("jobtag", "key")]),
            "drops column jobtag.key",
        ),
    ],
)
def test_non_additive_operations_are_refused(operation, problem):
    problems, plan = _problems(operation)
    assert plan is None
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    "operation",
    [
        migrations.AddField("jobrecord", "priority", models.IntegerField(null=True)),
        migrations.AddField("jobrecord", "priority", models.IntegerField(default=0, db_default=0)),
        migrations.AlterField("jobrecord", "wire_name", models.CharField(max_length=300)),
        migrations.AddIndex("jobtag", models.Index(fields=["value"], name="probe_tag_value")),
        migrations.SeparateDatabaseAndState(state_operations=[migrations.RemoveField("jobtag", "key")]),
    ],
)
def test_additive_operations_pass(operation):
    assert _problems(operation) == ([], None)


def test_a_documented_plan_lets_a_removal_through_and_names_it():
    docstring = "Drop the old column.\n\nUPGRADE-PLAN: unused since 0.3; see docs/upgrading.md#removing-a-column\n"
    problems, plan = _problems(migrations.RemoveField("jobrecord", "terminal_cause"), docstring=docstring)
    assert problems == ["drops column jobrecord.terminal_cause"]
    assert plan == "unused since 0.3; see docs/upgrading.md#removing-a-column"
    _, from_attribute = _problems(
        migrations.RemoveField("jobrecord", "terminal_cause"), upgrade_plan="two-step rename, see docs/upgrading.md"
    )
    assert from_attribute == "two-step rename, see docs/upgrading.md"


def test_an_empty_plan_marker_is_not_a_plan():
    _, plan = _problems(migrations.RemoveField("jobrecord", "terminal_cause"), docstring="UPGRADE-PLAN:   \n")
    assert plan is None


@pytest.mark.django_db
def test_the_transition_log_has_no_foreign_key_constraint_outside_sqlite_and_keeps_its_indexes():
    # Migration 0016: the store's statements vouch for the relation; SQLite keeps its table as it
    # was, because changing it there would copy the table without the indexes made with SQL.
    from django.db import connection

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "backwave_django_jobtransition")
    keys = [c["foreign_key"] for c in constraints.values() if c["foreign_key"]]
    if connection.vendor == "sqlite":
        assert keys == [("backwave_django_jobrecord", "sequence")]
    else:
        assert keys == []
    assert "backwave_transition_position" in constraints
    assert constraints["backwave_transition_ordinal"]["unique"]
