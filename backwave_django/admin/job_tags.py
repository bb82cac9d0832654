"""The job list's tag filter: facets with counts, a search box over the tags, its JSON endpoint.

The filter reads only through :mod:`backwave_django.monitor`, so the console and the monitor API
agree on what a tag filter matches and on how tags sort:

- **Filtering** (``?tl=<label>``, ``?tk=<key>&tv=<value>``, or ``?tk=<key>`` for any value under a
  key) uses the monitor's tag predicates (``monitor.with_tags``): one probe of the tag table's
  ``(job, key, value)`` index per job the page walks.
- **Facets**: the most common values under the chosen key (the labels when no key is chosen), with
  how many jobs carry each, counted by ``monitor.facet_sample`` among the newest jobs that match
  the other filters and carry the key (:data:`FACET_SAMPLE`). Only the chosen key is counted and
  the sample is capped, so drawing the filter costs the same on a table of any size (the caption
  says "among the newest 1,000 matching").
- **Search** (``?tq=<prefix>``): ``monitor.suggest_tags`` over the labels and keys, or, with a key
  chosen, over that key's values. It is a plain GET form, complete without JavaScript; a few lines
  of script in ``tag_filter.html`` fill the same list while typing from
  :func:`suggestions_response` (``tag-suggestions/`` under the job admin's URLs, ``view_jobrecord``).

``docs/admin.md`` ("Jobs") describes what the operator sees.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict

from .. import monitor
from ..core.tags import TagPair
from ..models import JobRecord
from ..monitor import tags as monitor_tags

#: The facets count the values among this many of the newest jobs matching the other filters.
FACET_SAMPLE = monitor_tags.FACET_SAMPLE
#: How many values the facet list shows.
FACET_CHOICES = 20
#: How many suggestions the search box shows (the page, and the endpoint unless asked for fewer).
SUGGESTIONS = 10
#: Characters JSON may carry but an HTML parser must never see raw (as Django's ``json_script``).
_JSON_ESCAPES = {ord("<"): "\\u003C", ord(">"): "\\u003E", ord("&"): "\\u0026"}


def _pop_param(params: dict[str, Any], name: str) -> str | None:
    """One query-string value the filter owns (Django passes lists; the last value wins)."""
    value = params.pop(name, None)
    if isinstance(value, list):
        value = value[-1] if value else None
    return value if isinstance(value, str) else None


def tag_params(key: str, value: str) -> dict[str, str]:
    """The filter's parameters for one tag, a label (``key == ""``), or a bare key (``value == ""``)."""
    if not key:
        return {TagFilter.LABEL: value}
    return {TagFilter.KEY: key, TagFilter.VALUE: value} if value else {TagFilter.KEY: key}


def suggestion_text(key: str, value: str, *, stage_key: str | None) -> str:
    """How a suggestion reads: ``vip`` (a label), ``tenant: …`` (a key), ``tenant: acme`` (a value)."""
    if stage_key is None:
        return value if not key else f"{key}: …"
    return f"{key}: {value}" if key else value


class TagFilter(admin.ListFilter):
    """Has a tag: ``?tl=<label>``, ``?tk=<key>&tv=<value>``, or any value under a key ``?tk=<key>``.

    Key and value travel as separate parameters, so a colon or ``=`` inside a tag round-trips
    (nothing is ever split). ``?tq=<prefix>`` searches the tags (it narrows nothing). See the
    module docstring for where facets and suggestions come from and what they cost.
    """

    title = "tag"
    template = "admin/backwave_django/jobrecord/tag_filter.html"
    LABEL, KEY, VALUE, SEARCH = "tl", "tk", "tv", "tq"

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.label = _pop_param(params, self.LABEL) or None
        self.key = _pop_param(params, self.KEY) or None
        self.tag_value = _pop_param(params, self.VALUE) or None
        self.search = _pop_param(params, self.SEARCH)
        for name, value in ((self.LABEL, self.label), (self.KEY, self.key), (self.VALUE, self.tag_value)):
            if value is not None:
                self.used_parameters[name] = value
        self.others: QuerySet[JobRecord] | None = None
        self.facets: list[dict[str, Any]] = []
        self.suggestions: list[dict[str, Any]] = []
        self.any_value: dict[str, Any] | None = None
        self.hidden_inputs: list[tuple[str, str]] = []

    @property
    def selected(self) -> tuple[str, str] | None:
        """The chosen tag as ``(key, value)`` (``value == ""``: any value under the key)."""
        if self.label:
            return ("", self.label)
        if self.key:
            return (self.key, self.tag_value or "")
        return None

    @property
    def predicate(self) -> monitor.TagPredicate | None:
        selected = self.selected
        if selected is None:
            return None
        key, value = selected
        if not key:
            return monitor.HasLabel(value)
        return monitor.HasKeyValue(key, value) if value else monitor.HasKey(key)

    @property
    def facet_key(self) -> str:
        """The key whose values the facet list counts: the chosen one, else the labels (``""``)."""
        return self.key or ""

    @property
    def sample_text(self) -> str:
        """How many of the newest matching jobs the facet counts are taken among (``1,000``)."""
        return f"{FACET_SAMPLE:,}"

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return [self.LABEL, self.KEY, self.VALUE, self.SEARCH]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        # What the other filters selected: the facets count among these jobs.
        self.others = queryset
        predicate = self.predicate
        return queryset if predicate is None else monitor.with_tags(queryset, [predicate])

    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:
        everything = [self.LABEL, self.KEY, self.VALUE, self.SEARCH]
        selected = self.selected

        def link(key: str, value: str) -> str:
            return str(changelist.get_query_string(tag_params(key, value), remove=everything))

        population = self.others if self.others is not None else changelist.root_queryset
        counted: list[tuple[str, int | None]] = [
            *monitor.facet_sample(self.facet_key, population, sample=FACET_SAMPLE, max_results=FACET_CHOICES)
        ]
        shown = {value for value, _ in counted}
        if selected is not None and selected[0] == self.facet_key and selected[1] not in ("", *shown):
            counted.append((selected[1], None))  # a deep link to a value outside the sample
        self.facets = [
            {
                "display": value,
                "count": count,
                "selected": selected == (self.facet_key, value),
                "query_string": link(self.facet_key, value),
            }
            for value, count in counted
        ]
        if self.key:
            self.any_value = {"selected": selected == (self.key, ""), "query_string": link(self.key, "")}
        if self.search is not None:
            stage_key = self.key or None
            found = monitor.suggest_tags(self.search, key=stage_key, max_results=SUGGESTIONS)
            self.suggestions = [
                {
                    "display": suggestion_text(key, value, stage_key=stage_key),
                    "query_string": link(key, value),
                }
                for key, value in found
            ]
        kept = QueryDict(changelist.get_query_string(remove=[self.SEARCH])[1:])
        self.hidden_inputs = [(name, value) for name, values in kept.lists() for value in values]
        yield {
            "selected": selected is None,
            "query_string": changelist.get_query_string(remove=everything),
            "display": "All",
        }
        yield from self.facets


# --- The search box's JSON endpoint --------------------------------------------------------------


def _json(data: Any, status: int = 200) -> HttpResponse:
    body = json.dumps(data, ensure_ascii=False).translate(_JSON_ESCAPES)
    response = HttpResponse(body, status=status, content_type="application/json")
    response["X-Content-Type-Options"] = "nosniff"
    return response


def suggestions_response(request: HttpRequest, *, allowed: bool) -> HttpResponse:
    """GET ``?q=<prefix>[&key=<key>][&after_key=…&after_value=…][&n=…]``: the tag filter's
    suggestions as JSON, ``{"suggestions": [{"key", "value", "text", "query"}], "after"}``.

    ``key`` absent: labels then keys; present (``""`` for the labels): that key's values.
    ``query`` is the job-list query string that applies the suggestion; ``after`` is the cursor of
    the next page (null on the last one). ``allowed``: the user may view jobs (else 403). Every
    ``<``, ``>`` and ``&`` is escaped, so the body is inert even if it were read as HTML.
    """
    if not allowed:
        raise PermissionDenied
    if request.method != "GET":
        return _json({"error": "GET only."}, status=405)
    stage_key = request.GET.get("key")
    after: TagPair | None = None
    if "after_key" in request.GET or "after_value" in request.GET:
        after = (request.GET.get("after_key", ""), request.GET.get("after_value", ""))
    try:
        wanted = int(request.GET.get("n", SUGGESTIONS))
        found = monitor.suggest_tags(request.GET.get("q", ""), key=stage_key, after=after, max_results=wanted)
    except (TypeError, ValueError) as exc:
        return _json({"error": str(exc)}, status=400)
    items = [
        {
            "key": key,
            "value": value,
            "text": suggestion_text(key, value, stage_key=stage_key),
            "query": _query(key, value),
        }
        for key, value in found
    ]
    full = bool(found) and len(found) >= min(max(wanted, 1), monitor.MAX_SUGGESTIONS)
    after_next = {"key": found[-1][0], "value": found[-1][1]} if full else None
    return _json({"suggestions": items, "after": after_next})


def _query(key: str, value: str) -> str:
    query = QueryDict(mutable=True)
    query.update(tag_params(key, value))
    return query.urlencode()
