"""Byte accounting for JSON values and UTF-8 text; pure helpers shared by every layer."""

from __future__ import annotations

import json
from typing import Any

#: One encoder for every call: ``json.dumps`` with options builds a new one each time.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def json_bytes(value: Any) -> bytes:
    """The canonical stored form of a JSON value (compact, UTF-8, no ASCII escaping).

    Raises ``TypeError`` when the value is not JSON-serializable.
    """
    return _CANONICAL.encode(value).encode()


def json_size(value: Any) -> int:
    """Size in bytes of a JSON value, as the payload and output limits count it."""
    return len(json_bytes(value))


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes``.

    The cut never splits a code point: ``"ééé"`` with 5 bytes gives ``"éé"``.
    """
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max(max_bytes, 0)].decode(errors="ignore")
