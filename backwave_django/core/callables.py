"""The type variables of a job's function: its parameters ``P`` and its return type ``R``.

Shared by the job definition (``registry``) and its enqueue options (``client``), so that
``send_invoice.using(...).enqueue(...)`` type-checks against ``send_invoice``'s own signature.
"""

from __future__ import annotations

from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
