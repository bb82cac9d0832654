"""Actions over the whole filter: "Requeue all 54 Dead-Lettered", "Retry all now", "Cancel all".

Beside the bulk actions on the selected rows, a filtered job list offers one button per action
that applies to every job the filter (and search) matches, not only the page shown
(``docs/admin.md``, "Actions over the whole filter"). The button opens a confirmation page that
states how many jobs it will act on; nothing changes until that page is posted. Then:

- the button is offered only for a filter ``core/job_filter.py`` read completely; the page states
  the filter in words and carries it, with how many jobs matched and the newest of them
  (``through``), as a signed token (``django.core.signing``). The POST is refused unless the
  token is intact and names the same filter; the filter is read again and the jobs counted
  again, and when the count changed nothing is done: the page asks again with the new count;
- only the jobs that matched when the page was drawn are acted on (``through``), so jobs
  enqueued meanwhile are left alone;
- jobs are read in batches of :data:`BATCH` along the primary key and each gets its own
  ``operator`` call, so every job that acted writes its one ``OperatorAudit`` row, and an
  interrupted run leaves what it did done (running it again picks up the rest, which still match);
- above the ``CONSOLE_BULK_LIMIT`` setting (10,000 by default) it refuses to start without a
  second confirmation, a checkbox on the confirmation page.

Counting stops at the limit plus one (a capped count, like the list's own), so the page costs the
same on any table size. The confirmation page (GET) and the action (POST) each need the action's
permission; a forged or unpermitted POST is refused with 403 and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.options import IncorrectLookupParameters
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import reverse

from .. import operator
from ..conf import get_settings
from ..core import actors
from ..core.job_filter import ParsedFilter, parse
from ..core.states import JobState
from ..models import JobRecord
from .console import CANCEL_PERMISSION, REQUEUE_PERMISSION, Acted, SeeOther, result_message
from .job_actions import (
    CANCEL_LABELS,
    REQUEUE_LABELS,
    RETRY_NOW_LABELS,
    RUNNING_CANCEL_TEXT,
    confirmation_page,
    job_name,
)
from .job_list import JobChangeList, failure_list, failure_tab, retrying_view

#: Jobs read (and acted on, one operator call each) per batch.
BATCH = 500
#: A request stops starting new batches after this many seconds and answers with a page that
#: goes on where it stopped (at once, with JavaScript; with a button without), so no single
#: request runs into a server's or a proxy's timeout.
TIME_BUDGET = 10.0
#: How many of the jobs to act on the confirmation page names.
PREVIEW = 10
TERMINAL_STATES = [state for state in JobState if state.is_terminal]
#: The confirmation's token is signed with this salt and honoured for this long (seconds).
TOKEN_SALT = "backwave_django.job_bulk.whole_filter"
TOKEN_MAX_AGE = 3600
#: The parameters of the list's URL an action's URL leaves out: they do not select jobs.
NOT_FILTERS = ("p", "o", "all", "e")


@dataclass(frozen=True)
class WholeFilterAction:
    """One action over the whole filter: which of the matching jobs it applies to, and how."""

    slug: str
    verb: str
    permission: str
    applies_to: Q
    run: Callable[..., Any]
    labels: dict[str, str]
    danger: bool = False


ACTIONS = {
    action.slug: action
    for action in (
        WholeFilterAction(
            "requeue",
            "Requeue",
            REQUEUE_PERMISSION,
            Q(state__in=[JobState.DEAD_LETTERED, JobState.QUARANTINED]),
            operator.requeue,
            REQUEUE_LABELS,
        ),
        WholeFilterAction(
            "retry-now",
            "Retry now",
            REQUEUE_PERMISSION,
            Q(state=JobState.SCHEDULED, attempt__gte=1),
            operator.retry_now,
            RETRY_NOW_LABELS,
        ),
        WholeFilterAction(
            "cancel",
            "Cancel",
            CANCEL_PERMISSION,
            ~Q(state__in=TERMINAL_STATES),
            operator.cancel,
            CANCEL_LABELS,
            danger=True,
        ),
    )
}


def _url(slug: str, request: HttpRequest) -> str:
    query = request.GET.copy()
    for name in NOT_FILTERS:
        query.pop(name, None)
    encoded = query.urlencode()
    return reverse("admin:backwave_django_jobrecord_all", args=[slug]) + (f"?{encoded}" if encoded else "")


def report_filter(model_admin: Any, request: HttpRequest, cl: JobChangeList) -> None:
    """Tell the operator each parameter the list could not read (it then shows no jobs), and
    what the search says about itself."""
    for error in cl.bw_errors:
        model_admin.message_user(
            request, f"Filter not understood, so no jobs are shown: {error.text}.", messages.ERROR
        )
    for note in cl.bw_search_notes:
        model_admin.message_user(request, note, messages.INFO)


def whole_filter_buttons(request: HttpRequest, cl: JobChangeList) -> list[dict[str, str]]:
    """The job list's buttons for the whole filter, each only with its permission and only where it
    applies: Requeue on a failure list, Retry now on the Retrying view, Cancel on any other
    filtered list; none for a filter with a parameter that did not read. Labels use the list's own
    (capped) count, so they cost no query."""
    if not cl.bw_filter_ok or not (cl.has_active_filters or cl.query):
        return []
    count = cl.paginator.count_label
    state = failure_tab(request)
    offered = []
    if failure_list(request):
        noun = f"{state.label}" if state is not None else "failed"
        offered.append(("requeue", f"Requeue all {count} {noun}…"))
    elif retrying_view(request):
        offered.append(("retry-now", f"Retry all {count} now…"))
    else:
        offered.append(("cancel", "Cancel all matching…"))
    user = request.user
    return [
        {"url": _url(slug, request), "label": label, "testid": f"bw-all-{slug}"}
        for slug, label in offered
        if user.has_perm(ACTIONS[slug].permission)
    ]


def _token(action: WholeFilterAction, parsed: ParsedFilter, through: int, count: int) -> str:
    """What the confirmation page showed, signed: the action, the filter, its newest job, the count."""
    snapshot = {
        "action": action.slug,
        "filter": parsed.filter.canonical(),
        "through": through,
        "count": count,
    }
    return signing.dumps(snapshot, salt=TOKEN_SALT)


def _snapshot(
    request: HttpRequest, action: WholeFilterAction, parsed: ParsedFilter
) -> tuple[int, int] | None:
    """``(through, count)`` from the posted token, or None when it is missing, altered, expired or
    made for another action or another filter than the one the URL names now."""
    try:
        snapshot = signing.loads(request.POST.get("token", ""), salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(snapshot, dict) or snapshot.get("action") != action.slug:
        return None
    if snapshot.get("filter") != parsed.filter.canonical():
        return None
    through, count = snapshot.get("through"), snapshot.get("count")
    if not (isinstance(through, int) and isinstance(count, int)):
        return None
    return through, count


def whole_filter_view(model_admin: Any, request: HttpRequest, action: str) -> HttpResponse:
    """GET: the confirmation page; POST (with ``confirm=yes`` and the page's token): act on every
    matching job, or ask again when the filter's count changed since the page was drawn."""
    chosen = ACTIONS.get(action)
    if chosen is None:
        raise Http404(f"No action “{action}” over the whole filter.")
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    if not (model_admin.has_view_permission(request) and request.user.has_perm(chosen.permission)):
        raise PermissionDenied
    back_to_list = SeeOther(back_url(request))
    parsed = parse(request.GET.lists())
    if not parsed.ok:
        # The list names each parameter it could not read, and shows no jobs for them.
        model_admin.message_user(
            request,
            f"{chosen.verb} refused: the filter is not understood; nothing was changed.",
            messages.ERROR,
        )
        return back_to_list
    if not parsed.filter.narrows:
        model_admin.message_user(
            request, "Choose a filter or search first; nothing was changed.", messages.WARNING
        )
        return back_to_list
    try:
        cl = model_admin.get_changelist_instance(request)
    except IncorrectLookupParameters:
        model_admin.message_user(
            request, "That filter is not valid here; nothing was changed.", messages.ERROR
        )
        return back_to_list
    matching = cl.get_queryset(request).filter(chosen.applies_to).order_by().prefetch_related(None)
    limit = get_settings().console_bulk_limit
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        snapshot = _snapshot(request, chosen, parsed)
        if snapshot is None:
            model_admin.message_user(
                request,
                "The confirmation does not match this filter (altered, or older than an hour); "
                "nothing was changed. Check the filter below and confirm again.",
                messages.ERROR,
            )
            return _confirm(model_admin, request, chosen, parsed, matching, limit, back_to_list)
        through, confirmed = snapshot
        matching = matching.filter(pk__lte=through)
        count = matching.values("pk")[: limit + 1].count()
        first_request = "after" not in request.POST
        if first_request and count != confirmed:
            model_admin.message_user(
                request,
                f"The filter now matches {_amount(count, limit)} jobs, not the {_amount(confirmed, limit)} "
                "confirmed; nothing was changed. Check the new count and confirm again.",
                messages.WARNING,
            )
            return _confirm(model_admin, request, chosen, parsed, matching, limit, back_to_list)
        if count <= limit or request.POST.get("beyond_limit") == "yes":
            return _run(model_admin, request, chosen, matching, back_to_list, through, count)
    return _confirm(model_admin, request, chosen, parsed, matching, limit, back_to_list)


def _amount(count: int, limit: int) -> str:
    return f"more than {limit:,}" if count > limit else f"{count:,}"


def _confirm(
    model_admin: Any,
    request: HttpRequest,
    action: WholeFilterAction,
    parsed: ParsedFilter,
    matching: QuerySet[JobRecord],
    limit: int,
    back: HttpResponse,
) -> HttpResponse:
    """The confirmation page: how many jobs (capped at the limit), the filter in words, the first
    few, and the signed token the POST must carry."""
    through = matching.order_by("-pk").values_list("pk", flat=True).first()
    if through is None:
        model_admin.message_user(
            request,
            f"No job matching this filter can be acted on ({action.verb}); nothing was changed.",
            messages.WARNING,
        )
        return back
    matching = matching.filter(pk__lte=through)
    count = matching.values("pk")[: limit + 1].count()
    beyond = count > limit
    amount = _amount(count, limit)
    preview = matching.order_by("-pk").only("pk", "job_id", "wire_name")[:PREVIEW]
    explanation = ""
    if action.slug == "cancel":
        running = matching.filter(state=JobState.LEASED).values("pk")[: limit + 1].count()
        explanation = (f"{running:,} of them are running now. " if running else "") + RUNNING_CANCEL_TEXT
    return confirmation_page(
        model_admin,
        request,
        {
            "title": f"{action.verb} all matching jobs?",
            "bw_lead": f"{action.verb}: {amount} job{'s' if count != 1 else ''} matching this filter.",
            "bw_filter": parsed.filter.words(),
            "bw_explanation": explanation,
            "bw_items": [{"name": job_name(job), "detail": ""} for job in preview],
            "bw_more": f"… and {count - len(preview):,} more." if count > len(preview) and not beyond else "",
            "bw_action_url": request.get_full_path(),
            "bw_fields": [("confirm", "yes"), ("token", _token(action, parsed, through, count))],
            "bw_second_confirmation": (
                f"Yes, {action.verb.lower()} all of them: more than the console's limit of {limit:,} jobs "
                "(CONSOLE_BULK_LIMIT). They are acted on in batches, each job audited."
                if beyond
                else ""
            ),
            "bw_submit": f"Yes, {action.verb.lower()} {amount} job{'s' if count != 1 else ''}",
            "bw_back_url": back["Location"],
            "bw_danger": action.danger,
            "bw_testid": "bw-confirm-all",
            "bw_count": count,
        },
    )


def _progress(request: HttpRequest, action: WholeFilterAction) -> tuple[int, list[tuple[str, str, int]]]:
    """Where an earlier request of this run stopped (``after``) and what it did (``done`` fields,
    ``RESULT:count``); a value that does not parse counts as nothing done yet."""
    try:
        after = max(int(request.POST.get("after", "0")), 0)
    except ValueError:
        after = 0
    done = []
    for field in request.POST.getlist("done"):
        result, _, count = field.partition(":")
        if result in action.labels and count.isdigit():
            done.append((result, action.labels[result], int(count)))
    return after, done


def _run(
    model_admin: Any,
    request: HttpRequest,
    action: WholeFilterAction,
    matching: QuerySet[JobRecord],
    back: HttpResponse,
    through: int,
    count: int,
) -> HttpResponse:
    """Act on the jobs of ``matching``, a batch at a time along the primary key, for at most
    :data:`TIME_BUDGET` seconds; then say what happened, or go on in the next request."""
    actor = actors.admin_user(request.user)
    last, earlier = _progress(request, action)
    done: list[Acted] = []
    started = time.monotonic()
    while True:
        batch = list(matching.filter(pk__gt=last).order_by("pk").only("pk", "job_id", "wire_name")[:BATCH])
        if not batch:
            break
        acted: dict[str, list[JobRecord]] = {}
        for job in batch:
            result = action.run(job.job_id, actor=actor).name
            done.append(Acted(result, action.labels[result], job_name(job)))
            acted.setdefault(action.labels[result], []).append(job)
        for label, jobs in acted.items():
            LogEntry.objects.log_actions(
                request.user.pk or 0, jobs, CHANGE, change_message=f"{action.verb} all matching: {label}"
            )
        last = batch[-1].pk
        if time.monotonic() - started >= TIME_BUDGET and matching.filter(pk__gt=last).exists():
            planned = count + sum(n for _, _, n in earlier)  # what was left when this request began
            return _continue(model_admin, request, action, through, last, [*earlier, *_tally(done)], planned)
    result_message(model_admin, request, done, list(action.labels.values()), earlier)
    return back


def _tally(done: list[Acted]) -> list[tuple[str, str, int]]:
    counts: dict[tuple[str, str], int] = {}
    for acted in done:
        counts[(acted.result, acted.label)] = counts.get((acted.result, acted.label), 0) + 1
    return [(result, label, count) for (result, label), count in counts.items()]


def _continue(
    model_admin: Any,
    request: HttpRequest,
    action: WholeFilterAction,
    through: int,
    after: int,
    done: list[tuple[str, str, int]],
    planned: int,
) -> HttpResponse:
    """The page between two requests of one run: how far it got (of ``planned``, counted up to the
    limit), and a form that goes on from there."""
    so_far: dict[str, int] = {}
    for result, _, n in done:
        so_far[result] = so_far.get(result, 0) + n
    total = sum(so_far.values())
    fields = [("confirm", "yes"), ("token", request.POST.get("token", "")), ("after", str(after))]
    if request.POST.get("beyond_limit") == "yes":
        fields.append(("beyond_limit", "yes"))
    fields += [("done", f"{result}:{n}") for result, n in so_far.items()]
    limit = get_settings().console_bulk_limit
    amount = f"more than {limit:,}" if planned > limit else f"{planned:,}"
    return confirmation_page(
        model_admin,
        request,
        {
            "title": f"{action.verb}: going on…",
            "bw_lead": f"{action.verb}: {total:,} of {amount} jobs done so far; going on with the rest.",
            "bw_explanation": "Each job done is audited. Leaving now keeps what was done; the same action "
            "again picks up the rest, which still match the filter.",
            "bw_action_url": request.get_full_path(),
            "bw_fields": fields,
            "bw_submit": "Go on",
            "bw_back_url": back_url(request),
            "bw_testid": "bw-continue",
            "bw_auto_submit": True,
        },
    )


def back_url(request: HttpRequest) -> str:
    """The job list with this request's filter (and whatever else its URL has, so the list can
    name what it could not read)."""
    base = reverse("admin:backwave_django_jobrecord_changelist")
    query = request.GET.urlencode()
    return f"{base}?{query}" if query else base
