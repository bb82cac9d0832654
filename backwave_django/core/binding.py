"""Whether a call binds to a signature, decided once per call shape instead of by ``bind``.

``inspect.Signature.bind`` builds an ``OrderedDict`` of the call's arguments and walks every
parameter; enqueueing a job only needs to know whether the call binds (the payload stores the
call as given). :class:`CallShape` decides that from sets computed once per signature, for
signatures whose parameters are all positional-or-keyword or keyword-only (most handlers).
Anything else (positional-only parameters, ``*args``, ``**kwargs``), and every call it refuses,
goes to ``bind``, which also words the error: a shape never accepts a call that ``bind`` refuses
(``tests/core/test_binding.py`` compares the two on every call shape).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

_SIMPLE_KINDS = frozenset({inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY})


class CallShape:
    """The parameter names of one signature, arranged to answer :meth:`binds` with set checks."""

    __slots__ = ("_filled", "_names", "_required_after", "signature", "simple")

    def __init__(self, signature: inspect.Signature) -> None:
        parameters = list(signature.parameters.values())
        self.signature = signature
        #: Whether every parameter is positional-or-keyword or keyword-only (the set checks apply).
        self.simple = all(p.kind in _SIMPLE_KINDS for p in parameters)
        positional = [p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        required = frozenset(p.name for p in parameters if p.default is inspect.Parameter.empty)
        self._names = frozenset(p.name for p in parameters)
        # Indexed by the number of positional arguments given: the parameters they fill, and the
        # required parameters left for keywords.
        self._filled = tuple(frozenset(positional[:count]) for count in range(len(positional) + 1))
        self._required_after = tuple(required - filled for filled in self._filled)

    def binds(self, args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether ``signature.bind(*args, **kwargs)`` succeeds (without its error message)."""
        if self.simple:
            count = len(args)
            if count >= len(self._filled):
                return False  # more positional arguments than positional parameters
            keys = kwargs.keys()
            return (
                keys <= self._names
                and self._required_after[count] <= keys
                and (count == 0 or keys.isdisjoint(self._filled[count]))
            )
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError:
            return False
        return True
