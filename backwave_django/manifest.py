"""The job manifest: the wire format of every registered job, as a committed JSON file.

A stored row outlives the code that enqueued it. Its wire name must still have a handler, and its
payload (``{"args": [...], "kwargs": {...}}``) must still bind to that handler's signature, or the
worker quarantines it. Those two things are the **wire format**, and they change silently when a
handler is renamed or a parameter is removed, renamed, reordered or made required.

``manage.py backwave_manifest --write`` records the wire format in ``backwave_manifest.json``;
``--check`` (in CI) compares the registered jobs with that file and fails with a diff and a
plain-English summary of what each change does to rows already in the database.

What is recorded, per wire name:

- ``parameters``: the handler's parameters after the context, in order, each with its ``name``,
  its ``kind`` (``positional_or_keyword``, ``keyword_only``, ``var_positional``, …), whether it is
  ``required`` (no default) and its ``annotation`` as written (or ``null``). These decide whether
  a stored payload binds.
- ``queue``: the job's default queue. Not part of binding, but rows already enqueued stay in the
  old queue, so a change needs a worker serving it until they drain.

Retry policy, default tags and ``takes_context`` are not recorded: they do not affect rows that
are already stored. Every difference in a recorded field fails ``--check`` (the file must stay
current, or a later removal could not be noticed); the summary says which ones break stored rows.

This module does no I/O: the command reads and writes the file.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .registry import JobDefinition

#: Bumped only if the file's layout changes (not when jobs change).
FORMAT_VERSION = 1
DEFAULT_FILENAME = "backwave_manifest.json"

_KIND_NAMES = {
    inspect.Parameter.POSITIONAL_ONLY: "positional_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}
_POSITIONAL_KINDS = ("positional_only", "positional_or_keyword")
_VARIADIC_KINDS = ("var_positional", "var_keyword")


class ManifestError(ValueError):
    """A manifest file that is not valid JSON or not in the expected layout."""


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the committed manifest and the registered jobs.

    ``breaking`` means rows enqueued before the change can quarantine (or bind their arguments to
    the wrong parameters) once the new code runs; the others need a look but break nothing stored.
    """

    wire_name: str
    message: str
    breaking: bool

    def __str__(self) -> str:
        return f"wire name {self.wire_name}: {self.message}"


def _annotation(parameter: inspect.Parameter) -> str | None:
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):  # modules with `from __future__ import annotations`
        return annotation
    return inspect.formatannotation(annotation)


def describe(definition: JobDefinition[Any, Any]) -> dict[str, Any]:
    """The recorded wire format of one job."""
    return {
        "parameters": [
            {
                "name": parameter.name,
                "kind": _KIND_NAMES[parameter.kind],
                "required": parameter.default is inspect.Parameter.empty
                and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD),
                "annotation": _annotation(parameter),
            }
            for parameter in definition.signature.parameters.values()
        ],
        "queue": definition.queue,
    }


def build(definitions: Mapping[str, JobDefinition[Any, Any]]) -> dict[str, Any]:
    """The manifest of these jobs (normally ``registry.definitions()``)."""
    return {
        "format": FORMAT_VERSION,
        "jobs": {wire_name: describe(definitions[wire_name]) for wire_name in sorted(definitions)},
    }


def render(manifest: Mapping[str, Any]) -> str:
    """Deterministic text for a manifest: sorted keys, two-space indent, trailing newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def parse(text: str) -> dict[str, Any]:
    """Read a manifest file's text; ``ManifestError`` says what is wrong with it."""
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("jobs"), dict):
        raise ManifestError('expected an object with a "jobs" object')
    if manifest.get("format") != FORMAT_VERSION:
        raise ManifestError(
            f"format {manifest.get('format')!r} is not supported (this version writes {FORMAT_VERSION})"
        )
    for wire_name, entry in manifest["jobs"].items():
        parameters = entry.get("parameters") if isinstance(entry, dict) else None
        if not isinstance(parameters, list) or not all(
            isinstance(p, dict) and {"name", "kind", "required"} <= set(p) for p in parameters
        ):
            raise ManifestError(
                f'job {wire_name!r} needs a "parameters" list of objects with name, kind and required'
            )
    return manifest


def diff(old_text: str, new_text: str, path: str) -> str:
    """A unified diff from the committed file to what ``--write`` would write."""
    return "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile=f"{path} (registered jobs)",
        )
    )


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every difference between two manifests, explained; empty when they record the same thing."""
    old_jobs: Mapping[str, Any] = old["jobs"]
    new_jobs: Mapping[str, Any] = new["jobs"]
    changes: list[Change] = []
    for wire_name in sorted(set(old_jobs) | set(new_jobs)):
        if wire_name not in new_jobs:
            changes.append(
                Change(
                    wire_name,
                    "removed — rows enqueued before this change will quarantine "
                    f"(no handler registered for wire name '{wire_name}'); keep a handler until they drain",
                    breaking=True,
                )
            )
        elif wire_name not in old_jobs:
            changes.append(Change(wire_name, "added (a new job; nothing stored is affected)", breaking=False))
        else:
            changes.extend(_compare_job(wire_name, old_jobs[wire_name], new_jobs[wire_name]))
    return changes


def _label(parameter: Mapping[str, Any]) -> str:
    prefix = {"var_positional": "*", "var_keyword": "**"}.get(parameter["kind"], "")
    return f"{prefix}{parameter['name']}"


def _compare_job(wire_name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    old_params = {p["name"]: p for p in old["parameters"]}
    new_params = {p["name"]: p for p in new["parameters"]}
    found = [
        *_removed_parameters(old_params, new_params, new["parameters"]),
        *_added_parameters(old_params, new_params),
        *_changed_parameters(old_params, new_params),
        *_moved_parameters(old["parameters"], new["parameters"]),
        *_queue_change(old, new),
    ]
    return [Change(wire_name, message, breaking=breaking) for message, breaking in found]


#: What one comparison found: its message, and whether stored rows break.
_Found = list[tuple[str, bool]]


def _removed_parameters(
    old_params: Mapping[str, Any], new_params: Mapping[str, Any], new_parameters: list[Any]
) -> _Found:
    """The parameters the new signature no longer has, and which stored rows that breaks."""
    new_has_var_keyword = any(p["kind"] == "var_keyword" for p in new_parameters)
    found: _Found = []
    for name, parameter in old_params.items():
        if name in new_params:
            continue
        if parameter["kind"] in _VARIADIC_KINDS:
            found.append(
                (
                    f"parameter {_label(parameter)} removed — rows enqueued before this change that "
                    "passed extra arguments will quarantine",
                    True,
                )
            )
        elif parameter["required"]:
            found.append(
                (
                    f"parameter {name} removed — rows enqueued before this change will quarantine",
                    True,
                )
            )
        elif new_has_var_keyword:
            found.append(
                (
                    f"parameter {name} removed — rows enqueued before this change that pass it positionally "
                    "will quarantine (passed by keyword, it lands in **kwargs)",
                    True,
                )
            )
        else:
            found.append(
                (
                    f"parameter {name} removed — rows enqueued before this change that pass it "
                    "will quarantine",
                    True,
                )
            )
    return found


def _added_parameters(old_params: Mapping[str, Any], new_params: Mapping[str, Any]) -> _Found:
    """The parameters the new signature adds (breaking without a default)."""
    found: _Found = []
    for name, parameter in new_params.items():
        if name in old_params:
            continue
        if parameter["required"]:
            found.append(
                (
                    f"parameter {name} added without a default — rows enqueued before this change do not "
                    "carry it and will quarantine; give it a default",
                    True,
                )
            )
        else:
            found.append((f"parameter {_label(parameter)} added (optional; stored rows still bind)", False))
    return found


def _changed_parameters(old_params: Mapping[str, Any], new_params: Mapping[str, Any]) -> _Found:
    """The parameters both signatures have, changed in kind, default or annotation."""
    found: _Found = []
    for name in old_params.keys() & new_params.keys():
        before, after = old_params[name], new_params[name]
        if before["kind"] != after["kind"]:
            found.append(
                (
                    f"parameter {name} changed from {before['kind']} to {after['kind']} — rows enqueued "
                    "before this change that pass it the old way will quarantine",
                    True,
                )
            )
        if not before["required"] and after["required"]:
            found.append(
                (
                    f"parameter {name} lost its default — rows enqueued before this change that left it "
                    "out will quarantine",
                    True,
                )
            )
        elif before["required"] and not after["required"]:
            found.append((f"parameter {name} gained a default (stored rows still bind)", False))
        if before.get("annotation") != after.get("annotation"):
            found.append(
                (
                    f"parameter {name} annotation changed from {before.get('annotation')} to "
                    f"{after.get('annotation')} — stored rows still carry values of the old type; make "
                    "sure the handler accepts them",
                    False,
                )
            )
    return found


def _moved_parameters(old_parameters: list[Any], new_parameters: list[Any]) -> _Found:
    """The positional parameters that moved (stored positional arguments bind to the wrong one)."""
    found: _Found = []
    old_order = [p["name"] for p in old_parameters if p["kind"] in _POSITIONAL_KINDS]
    new_order = [p["name"] for p in new_parameters if p["kind"] in _POSITIONAL_KINDS]
    for name in old_order:
        if name in new_order and old_order.index(name) != new_order.index(name):
            found.append(
                (
                    f"positional parameter {name} moved from position {old_order.index(name) + 1} to "
                    f"{new_order.index(name) + 1} — rows enqueued before this change that pass it "
                    "positionally bind it to the wrong parameter",
                    True,
                )
            )
    return found


def _queue_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Found:
    """A changed queue (stored rows stay on the old one)."""
    found: _Found = []
    if old.get("queue") != new.get("queue"):
        found.append(
            (
                f"queue changed from {old.get('queue')} to {new.get('queue')} — rows enqueued before this "
                f"change stay in {old.get('queue')}; keep a worker serving it until they drain",
                False,
            )
        )
    return found
