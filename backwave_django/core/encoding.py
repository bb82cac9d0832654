"""The stored JSON of values, its byte accounting, and UTF-8 text; pure helpers shared by every layer."""

from __future__ import annotations

import json
from typing import Any

#: One encoder for every call: ``json.dumps`` with options builds a new one each time.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: The C encoder that ``_CANONICAL.encode`` builds for each call, with the same arguments; None
#: where the interpreter has no C accelerator (``_CANONICAL`` then encodes).
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_STR: Any = getattr(json.encoder, "c_encode_basestring", None)
#: One such encoder for every call, built without the ``markers`` dict that finds cycles: it is
#: reentrant (it keeps no state between calls) and skips a dict insert and delete per list and
#: dict encoded. A cycle then ends in a ``RecursionError``, and :func:`json_bytes` encodes the
#: value again the checking way, which raises what ``_CANONICAL`` raises.
_UNCHECKED: Any = (
    None
    if _MAKE_ENCODER is None or _ENCODE_STR is None
    else _MAKE_ENCODER(None, _CANONICAL.default, _ENCODE_STR, None, ":", ",", False, False, False)
)


def json_bytes(value: Any) -> bytes:
    """The canonical stored form of a JSON value (compact, UTF-8, no ASCII escaping).

    Raises ``TypeError`` when the value is not JSON-serializable, ``ValueError`` for NaN, an
    infinity or a cycle. ``tests/core/test_values.py`` holds it to ``_CANONICAL.encode``.
    """
    if _MAKE_ENCODER is None or _ENCODE_STR is None:
        return _CANONICAL.encode(value).encode()
    try:
        return "".join(_UNCHECKED(value, 0)).encode()
    except RecursionError:
        pass  # a cycle, or nesting too deep: the checking encoder below tells them apart
    # A new ``markers`` dict per call, as ``JSONEncoder.iterencode`` makes: it finds cycles, and
    # an encoding that fails part-way leaves entries in it.
    encode = _MAKE_ENCODER({}, _CANONICAL.default, _ENCODE_STR, None, ":", ",", False, False, False)
    return "".join(encode(value, 0)).encode()


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


#: The types that come back from ``json.loads`` as themselves (a subclass comes back as its base).
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain_json(value: Any) -> bool:
    """Whether ``value``, which :func:`json_bytes` encodes without error, comes back from
    ``json.loads`` equal and of the same types: made only of ``str``, ``int``, ``float``,
    ``bool``, None, lists and dicts with ``str`` keys, none of them a subclass.

    The encoding refuses what else could differ (NaN and infinities, cycles, lone surrogates,
    ints too long to print); False means "not known to": compare the decoded value to be sure.
    """
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return True
    if kind is list:
        # A loop, not all(...) over a generator, and scalar items checked here, not by a call: the
        # check runs on every prepared job's payload.
        for item in value:  # noqa: SIM110
            if type(item) not in _PLAIN_SCALARS and not plain_json(item):
                return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _PLAIN_SCALARS and not plain_json(item)):
                return False
        return True
    return False
