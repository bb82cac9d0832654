"""Which limits are real: the one answer to "does anything use this limit?" (docs/flow-control.md,
"Overrides").

A limit is *known* when it has a ``LimitSettings`` row (a worker declares it, or an operator
overrides it), a Leased job holds one of its slots (``LimitLease``), or a job not yet ended
(Scheduled, Awaiting Parent or Leased) names it among its buckets (``limit_keys``). Any other
name is most likely a typo: the operator refuses to override it unless asked to create it
(``operator.set_limit(..., create=True)``), and the console and the CLI ask through it.

Costs: the row and the leases are index probes. The jobs are one ``EXISTS`` over the jobs not yet
ended, each job's pairs read by the database's JSON functions (:data:`_NAMES_LIMIT`), run only
when neither probe found the name; it scans those jobs when none names it (a typo). The
close-match suggestions read the (small) ``LimitSettings`` table, and only for a refusal.
"""

from __future__ import annotations

import difflib

from django.db import connections
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from ..core.states import JobState
from ..database import jobs_database
from ..models import JobRecord, LimitLease, LimitSettings
from .queues import SUGGESTION_CUTOFF

#: Whether some pair of a job's ``limit_keys`` (``[[name, bucket], ...]``) has the name first: on
#: each database, an expression over the column (``{keys}``) and the name (one parameter). A bucket
#: spelled like the name does not count, so JSON containment (``@>``), which ignores positions
#: within the pair, would not do.
_NAMES_LIMIT = {
    "postgresql": "EXISTS (SELECT 1 FROM jsonb_array_elements({keys}) AS pair WHERE pair ->> 0 = %s)",
    # JSON_TABLE decodes each name (JSON_CONTAINS would compare "na\u00efve" and "naïve" as
    # unequal); the binary collation tells "Stripe" from "stripe", as the other databases do.
    "mysql": "EXISTS (SELECT 1 FROM JSON_TABLE({keys}, '$[*]' COLUMNS (name TEXT CHARACTER SET "
    "utf8mb4 COLLATE utf8mb4_bin PATH '$[0]')) AS pair WHERE pair.name = %s)",
    "sqlite": "EXISTS (SELECT 1 FROM json_each({keys}) AS pair WHERE json_extract(pair.value, '$[0]') = %s)",
}


def _jobs_name(using: str, name: str) -> bool:
    """Whether a job not yet ended names limit ``name`` among its buckets."""
    connection = connections[using]
    quote = connection.ops.quote_name
    keys = f"{quote(JobRecord._meta.db_table)}.{quote('limit_keys')}"
    named = RawSQL(_NAMES_LIMIT[connection.vendor].format(keys=keys), (name,), output_field=BooleanField())
    pending = (JobState.SCHEDULED, JobState.AWAITING_PARENT, JobState.LEASED)
    jobs = JobRecord.objects.using(using).filter(state__in=pending, limit_keys__isnull=False)
    return jobs.filter(named).exists()


def known_limit(name: str) -> bool:
    """Whether anything uses limit ``name``: a ``LimitSettings`` row (declared by a worker, or
    overridden), a lease, or a job not yet ended (Scheduled, Awaiting Parent or Leased) that
    names it (see the module docstring).

    The one rule behind "no worker declares limit … and no job uses it" in the operator, the
    console and the CLI.
    """
    using = jobs_database()
    if LimitSettings.objects.using(using).filter(name=name).exists():
        return True
    if LimitLease.objects.using(using).filter(name=name).exists():
        return True
    return _jobs_name(using, name)


def similar_limits(name: str, *, limit: int = 3) -> list[str]:
    """The declared or overridden limits whose names are closest to ``name`` (a typo's likely
    intent), best first."""
    stored = LimitSettings.objects.using(jobs_database()).exclude(name=name).values_list("name", flat=True)
    lowered = {candidate.lower(): candidate for candidate in stored}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=limit, cutoff=SUGGESTION_CUTOFF)
    return [lowered[match] for match in matches]
