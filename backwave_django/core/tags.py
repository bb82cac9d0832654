"""Job Tags: a Label is ``("", value)``, a Keyed tag is ``(key, value)``. Nothing is ever parsed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

#: What callers pass: a bare string is a Label, a pair is a Keyed tag.
Tag: TypeAlias = str | tuple[str, str]
#: The stored form: ``(key, value)`` with ``key == ""`` for a Label.
TagPair: TypeAlias = tuple[str, str]

MAX_TAG_PART_LENGTH = 255


def normalize_tag(tag: object) -> TagPair:
    """Validate one tag and return its stored ``(key, value)`` pair."""
    if isinstance(tag, str):
        key, value = "", tag
    elif isinstance(tag, tuple | list) and len(tag) == 2 and all(isinstance(p, str) for p in tag):
        key, value = tag[0], tag[1]
        if not key:
            raise ValueError("A Keyed Tag key must be non-empty; use a plain string for a bare label.")
    else:
        raise TypeError(f"A Job Tag is a label string or a (key, value) pair of strings, got {tag!r}")
    if not value:
        raise ValueError("A Job Tag value must be non-empty.")
    for part in (key, value):
        if len(part) > MAX_TAG_PART_LENGTH:
            raise ValueError(
                f"A Job Tag key or value is at most {MAX_TAG_PART_LENGTH} characters, got {len(part)}"
            )
    return (key, value)


def normalize_tags(tags: Iterable[object]) -> tuple[TagPair, ...]:
    """Validate tags and collapse repeats (set semantics), keeping first-seen order."""
    if isinstance(tags, str | bytes):
        raise TypeError("tags must be a list of tags, not a single string")
    return tuple(dict.fromkeys(normalize_tag(t) for t in tags))


def tag_from_pair(pair: TagPair) -> Tag:
    """The caller-facing form of a stored pair: a Label comes back as its string."""
    key, value = pair
    return value if key == "" else (key, value)
