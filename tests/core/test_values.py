import re
import uuid
from datetime import UTC, datetime

import pytest

from backwave_django import Failure, NewJob, OutcomeReport, Success
from backwave_django.core.encoding import json_size, truncate_utf8
from backwave_django.core.tags import normalize_tags

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_json_size_counts_compact_utf8_bytes():
    assert json_size({"a": [1, 2]}) == len('{"a":[1,2]}')
    assert json_size("é") == 4  # quotes + two bytes


def test_truncate_utf8_never_splits_a_code_point():
    assert truncate_utf8("ééé", 5) == "éé"
    assert truncate_utf8("abc", 3) == "abc"
    assert truncate_utf8("a€", 3) == "a"


def test_tags_collapse_and_validate():
    assert normalize_tags(["vip", ("tenant", "acme"), "vip", ["tenant", "acme"]]) == (
        ("", "vip"),
        ("tenant", "acme"),
    )
    with pytest.raises(ValueError, match="value must be non-empty"):
        normalize_tags([""])
    with pytest.raises(ValueError, match="key must be non-empty"):
        normalize_tags([("", "x")])
    with pytest.raises(ValueError, match="value must be non-empty"):
        normalize_tags([("k", "")])
    with pytest.raises(TypeError, match="label string or a"):
        normalize_tags([("a", "b", "c")])
    with pytest.raises(TypeError, match="not a single string"):
        normalize_tags("vip")


def test_label_text_is_never_parsed():
    assert normalize_tags(["ratio 3:1"]) == (("", "ratio 3:1"),)


def _job(**kw):
    fields = {"job_id": uuid.uuid4(), "wire_name": "w", "payload": {}, "due_time": NOW, **kw}
    return NewJob(**fields)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"due_time": datetime(2026, 1, 1)}, ValueError, "due_time must be timezone-aware"),
        ({"job_id": "abc"}, TypeError, "job_id must be a uuid.UUID"),
        ({"wire_name": ""}, ValueError, "wire_name must be non-empty"),
        ({"queue": ""}, ValueError, "queue must be non-empty"),
        ({"queue": "q" * 129}, ValueError, "queue is at most 128"),
        ({"payload": {"when": NOW}}, TypeError, "payload must be JSON-serializable"),
        ({"payload": float("nan")}, TypeError, "payload must be JSON-serializable"),
        ({"parents": ["x"]}, TypeError, r"parents\[0\] must be a uuid.UUID"),
        ({"mode": 7}, ValueError, "mode must be a DependencyMode"),
    ],
)
def test_new_job_refuses_malformed_fields(kwargs, error, message):
    with pytest.raises(error, match=message):
        _job(**kwargs)


def test_outcome_report_tags_come_out_normalized_whatever_the_collection():
    def report(tags):
        return OutcomeReport(
            job_id=uuid.uuid4(), worker_id="w", attempt=1, outcome=Success(), added_tags=tags
        )

    assert report(()).added_tags == ()
    assert report([]).added_tags == ()
    assert report(["a", ("k", "v"), "a"]).added_tags == ("a", ("k", "v"))
    with pytest.raises(TypeError, match="not a single string"):
        report("")


def test_outcome_report_refuses_malformed_fields():
    with pytest.raises(TypeError, match="outcome must be"):
        OutcomeReport(job_id=uuid.uuid4(), worker_id="w", attempt=1, outcome="ok")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="output must be JSON-serializable"):
        OutcomeReport(job_id=uuid.uuid4(), worker_id="w", attempt=1, outcome=Success(), output={1, 2})
    with pytest.raises(ValueError, match="next_due_time must be timezone-aware"):
        Failure(next_due_time=datetime(2026, 1, 1), error="x")


ENCODED: list[object] = [
    None, True, 1, -2**70, 1.5, -0.0, "é\u2028\"\\\x00", [], {}, {"a": [1, {"b": None}], "é": "x"},
    (1, 2), {1: "a", None: 2, 1.5: 3, False: 4},
]  # fmt: skip
REFUSED: list[object] = [float("nan"), [float("inf")], {"a": object()}, {1, 2}, b"x", 10**5000]


@pytest.mark.parametrize("accelerated", [True, False])
def test_json_bytes_is_the_canonical_encoders_output_and_errors(
    accelerated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backwave_django.core import encoding

    if not accelerated:
        monkeypatch.setattr(encoding, "_MAKE_ENCODER", None)
    cycle: list[object] = []
    cycle.append(cycle)
    for value in ENCODED:
        assert encoding.json_bytes(value) == encoding._CANONICAL.encode(value).encode()
    for value in [*REFUSED, cycle, "\ud800"]:
        with pytest.raises((TypeError, ValueError)) as expected:
            encoding._CANONICAL.encode(value).encode()
        with pytest.raises(type(expected.value), match=f"^{re.escape(str(expected.value))}$"):
            encoding.json_bytes(value)
    # A failed encoding leaves nothing behind: the same list encodes once its bad item is gone.
    shared = [1, {"a": object()}]
    with pytest.raises(TypeError):
        encoding.json_bytes(shared)
    shared.pop()
    assert encoding.json_bytes(shared) == b"[1]"
