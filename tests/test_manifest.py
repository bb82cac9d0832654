"""The job manifest: the committed wire format and ``manage.py backwave_manifest --check/--write``."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backwave_django import JobContext, manifest, registry
from backwave_django.registry import JobDefinition

ROOT = Path(__file__).resolve().parents[1]


def definition(func: Callable[..., Any], *, queue: str = "default", takes_context: bool = False) -> Any:
    """A job definition that is not registered (the registry stays as the test app declared it)."""
    return JobDefinition(
        wire_name="send-invoice", func=func, queue=queue, retry=None, tags=(), takes_context=takes_context
    )


def manifest_of(func: Callable[..., Any], **options: Any) -> dict[str, Any]:
    return manifest.build({"send-invoice": definition(func, **options)})


def changes(before: Callable[..., Any], after: Callable[..., Any], **after_options: Any) -> list[str]:
    return [str(c) for c in manifest.compare(manifest_of(before), manifest_of(after, **after_options))]


def test_parameters_are_recorded_with_kind_required_and_annotation():
    def handler(order_id: str, /, amount: int = 0, *lines: str, currency: str, **extra: object) -> None: ...

    entry = manifest_of(handler)["jobs"]["send-invoice"]
    assert entry == {
        "queue": "default",
        "parameters": [
            {"name": "order_id", "kind": "positional_only", "required": True, "annotation": "str"},
            {"name": "amount", "kind": "positional_or_keyword", "required": False, "annotation": "int"},
            {"name": "lines", "kind": "var_positional", "required": False, "annotation": "str"},
            {"name": "currency", "kind": "keyword_only", "required": True, "annotation": "str"},
            {"name": "extra", "kind": "var_keyword", "required": False, "annotation": "object"},
        ],
    }


def test_the_context_parameter_is_not_part_of_the_wire_format():
    def with_context(ctx: JobContext, day: str) -> None: ...

    def without_context(day: str) -> None: ...

    assert manifest_of(with_context, takes_context=True) == manifest_of(without_context)


def test_unannotated_parameters_record_null():
    def handler(order_id):
        ...

    assert manifest_of(handler)["jobs"]["send-invoice"]["parameters"][0]["annotation"] is None


def test_the_rendered_manifest_is_sorted_and_deterministic():
    def a() -> None: ...

    def b(x: int) -> None: ...

    one = manifest.render(manifest.build({"b-job": definition(b), "a-job": definition(a)}))
    two = manifest.render(manifest.build({"a-job": definition(a), "b-job": definition(b)}))
    assert one == two
    assert one.endswith("\n")
    assert list(json.loads(one)["jobs"]) == ["a-job", "b-job"]


def test_the_test_apps_jobs_are_all_in_the_manifest():
    built = manifest.build(registry.definitions())
    assert {"test.echo", "test.sleep", "test.record"} <= set(built["jobs"])
    assert built["jobs"]["test.sleep"] == {
        "queue": "slow",
        "parameters": [
            {"name": "seconds", "kind": "positional_or_keyword", "required": True, "annotation": "float"},
            {
                "name": "marker",
                "kind": "positional_or_keyword",
                "required": False,
                "annotation": "str | None",
            },
        ],
    }


def test_identical_signatures_have_no_changes():
    def before(order_id: str, amount: int = 0) -> None: ...

    def after(order_id: str, amount: int = 0) -> dict[str, bool]:
        return {"sent": True}

    assert changes(before, after) == []


def _old(order_id: str, amount: int = 0) -> None: ...


def _removed_required(amount: int = 0) -> None: ...


def _removed_optional(order_id: str) -> None: ...


def _removed_optional_with_kwargs(order_id: str, **extra: object) -> None: ...


def _added_required(order_id: str, customer: str, amount: int = 0) -> None: ...


def _added_optional(order_id: str, amount: int = 0, note: str = "") -> None: ...


def _lost_default(order_id: str, amount: int) -> None: ...


def _keyword_only(order_id: str, *, amount: int = 0) -> None: ...


def _reordered(amount: int = 0, order_id: str = "") -> None: ...


def _retyped(order_id: str, amount: float = 0) -> None: ...


def _old_required_amount(order_id: str, amount: int) -> None: ...


@pytest.mark.parametrize(
    ("after", "expected", "breaking"),
    [
        (
            _removed_required,
            [
                "wire name send-invoice: parameter order_id removed — rows enqueued before this change will quarantine",
                "wire name send-invoice: positional parameter amount moved from position 2 to 1 — rows enqueued "
                "before this change that pass it positionally bind it to the wrong parameter",
            ],
            [True, True],
        ),
        (
            _removed_optional,
            [
                "wire name send-invoice: parameter amount removed — rows enqueued before this change that pass "
                "it will quarantine"
            ],
            [True],
        ),
        (
            _removed_optional_with_kwargs,
            [
                "wire name send-invoice: parameter amount removed — rows enqueued before this change that pass "
                "it positionally will quarantine (passed by keyword, it lands in **kwargs)",
                "wire name send-invoice: parameter **extra added (optional; stored rows still bind)",
            ],
            [True, False],
        ),
        (
            _added_required,
            [
                "wire name send-invoice: parameter customer added without a default — rows enqueued before this "
                "change do not carry it and will quarantine; give it a default",
                "wire name send-invoice: positional parameter amount moved from position 2 to 3 — rows enqueued "
                "before this change that pass it positionally bind it to the wrong parameter",
            ],
            [True, True],
        ),
        (
            _added_optional,
            ["wire name send-invoice: parameter note added (optional; stored rows still bind)"],
            [False],
        ),
        (
            _lost_default,
            [
                "wire name send-invoice: parameter amount lost its default — rows enqueued before this change "
                "that left it out will quarantine"
            ],
            [True],
        ),
        (
            _keyword_only,
            [
                "wire name send-invoice: parameter amount changed from positional_or_keyword to keyword_only — "
                "rows enqueued before this change that pass it the old way will quarantine"
            ],
            [True],
        ),
        (
            _retyped,
            [
                "wire name send-invoice: parameter amount annotation changed from int to float — stored rows "
                "still carry values of the old type; make sure the handler accepts them"
            ],
            [False],
        ),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_each_signature_change_is_explained(after, expected, breaking):
    found = manifest.compare(manifest_of(_old), manifest_of(after))
    assert [str(c) for c in found] == expected
    assert [c.breaking for c in found] == breaking


def test_reordering_positional_parameters_breaks_positional_rows():
    found = [str(c) for c in manifest.compare(manifest_of(_old), manifest_of(_reordered))]
    assert (
        "wire name send-invoice: positional parameter order_id moved from position 1 to 2 — rows enqueued "
        "before this change that pass it positionally bind it to the wrong parameter"
    ) in found
    assert (
        "wire name send-invoice: positional parameter amount moved from position 2 to 1 — rows enqueued "
        "before this change that pass it positionally bind it to the wrong parameter"
    ) in found


def test_gaining_a_default_is_compatible():
    found = manifest.compare(manifest_of(_old_required_amount), manifest_of(_old))
    assert [(str(c), c.breaking) for c in found] == [
        ("wire name send-invoice: parameter amount gained a default (stored rows still bind)", False)
    ]


def test_a_queue_change_is_reported_but_not_breaking():
    found = manifest.compare(manifest_of(_old), manifest_of(_old, queue="billing"))
    assert [(str(c), c.breaking) for c in found] == [
        (
            "wire name send-invoice: queue changed from default to billing — rows enqueued before this change "
            "stay in default; keep a worker serving it until they drain",
            False,
        )
    ]


def test_a_removed_wire_name_breaks_and_an_added_one_does_not():
    old = manifest.build({"old-job": definition(_old)})
    new = manifest.build({"new-job": definition(_old)})
    found = manifest.compare(old, new)
    assert [(c.wire_name, c.breaking) for c in found] == [("new-job", False), ("old-job", True)]
    assert "no handler registered for wire name 'old-job'" in str(found[1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", 'expected an object with a "jobs" object'),
        ('{"format": 99, "jobs": {}}', "format 99 is not supported"),
        ('{"format": 1, "jobs": {"x": {"parameters": [{"name": "a"}]}}}', "job 'x' needs a \"parameters\" list"),
    ],
)
def test_a_malformed_manifest_is_refused_with_the_reason(text, message):
    with pytest.raises(manifest.ManifestError, match=message):
        manifest.parse(text)


# --- The command -----------------------------------------------------------------------------


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("backwave_manifest", *args, stdout=out)
    return out.getvalue()


def test_write_then_check_passes(tmp_path):
    path = tmp_path / "manifest.json"
    assert "Wrote the wire format of" in run("--write", "--path", str(path))
    assert json.loads(path.read_text()) == manifest.build(registry.definitions())
    assert "matches the registered jobs" in run("--check", "--path", str(path))


def test_the_default_path_is_in_base_dir(tmp_path, settings):
    settings.BASE_DIR = tmp_path
    run("--write")
    assert (tmp_path / "backwave_manifest.json").exists()
    assert "matches" in run("--check")


def test_without_a_flag_the_manifest_is_printed():
    assert json.loads(run()) == manifest.build(registry.definitions())


def test_check_fails_with_a_diff_and_a_summary_when_a_job_changed(tmp_path):
    path = tmp_path / "manifest.json"
    run("--write", "--path", str(path))

    @registry.job("test.manifest-probe")
    def probe(order_id: str, amount: int = 0) -> None: ...

    try:
        run("--write", "--path", str(path))
    finally:
        registry.unregister("test.manifest-probe")

    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("backwave_manifest", "--check", "--path", str(path), stdout=out)
    assert raised.value.returncode == 1
    assert "1 breaking change(s)" in str(raised.value)
    output = out.getvalue()
    assert f"--- {path} (committed)" in output
    assert f"+++ {path} (registered jobs)" in output
    assert '-    "test.manifest-probe": {' in output
    assert (
        "wire name test.manifest-probe: removed — rows enqueued before this change will quarantine"
    ) in output


def test_check_without_the_file_says_how_to_create_it(tmp_path):
    expected = re.escape("does not exist. Create it with `manage.py backwave_manifest --write`")
    with pytest.raises(CommandError, match=expected) as raised:
        run("--check", "--path", str(tmp_path / "missing.json"))
    assert raised.value.returncode == 2


def test_check_of_a_broken_file_is_an_error_not_a_diff(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text("{")
    with pytest.raises(CommandError, match="is not a backwave manifest: not valid JSON") as raised:
        run("--check", "--path", str(path))
    assert raised.value.returncode == 2


def test_check_and_write_are_alternatives():
    with pytest.raises(CommandError, match="not allowed with argument"):
        run("--check", "--write")


def test_the_command_exits_1_when_a_committed_parameter_is_gone(tmp_path):
    path = tmp_path / "manifest.json"
    run("--write", "--path", str(path))
    committed = json.loads(path.read_text())
    committed["jobs"]["test.record"]["parameters"].append(
        {"name": "amount", "kind": "positional_or_keyword", "required": True, "annotation": "int"}
    )
    path.write_text(manifest.render(committed))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "BACKWAVE_TEST_DB": "sqlite",
    }
    result = subprocess.run(
        [sys.executable, "-m", "django", "backwave_manifest", "--check", "--path", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert (
        "wire name test.record: parameter amount removed — rows enqueued before this change will quarantine"
    ) in result.stdout
    assert "The registered jobs differ from" in result.stderr
