"""The Limits page: every flow-control limit with its declared and current bounds, its use, its
busiest buckets and the due jobs each holds back; and the override and clear forms.

A page of its own rather than a changelist, like the Queues page: a limit that jobs name but no
worker declares has no row to list. Viewing needs ``view_limitsettings``; overriding and clearing
need ``change_limits`` and go through :mod:`backwave_django.operator`, which audits them
(``set_limit`` / ``clear_limit``); see ``docs/flow-control.md``, "Overrides". Every value is
escaped by the template; a bound the form cannot read is refused with a message, nothing changed.
Overriding a limit nothing uses (``monitor.known_limit``: a typo, most of the time) opens a
confirmation page first; only its button, which posts ``create=yes``, creates the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from .. import clock, monitor, operator
from ..core import actors
from ..core.limits import LimitValues
from ..core.states import ClearLimitResult
from ..core.validation import validate_queue_name
from ..models import LimitSettings
from .console import BREADCRUMBS_AS_LIST, ReadOnlyAdmin, SeeOther, console_button
from .job_actions import confirmation_page

#: Who may override and clear limits.
CHANGE_LIMITS_PERMISSION = "backwave_django.change_limits"
#: The largest concurrency or rate the columns hold on every supported database.
MAX_BOUND = 2**31 - 1
#: The confirmation page's explanation, before overriding a limit nothing uses.
UNKNOWN_LIMIT_TEXT = (
    "Confirming stores the override {bounds} under this name and audits it (set_limit); jobs that "
    "name the limit are claimed under it from then on. If the name is a typo, go back: nothing has "
    "been stored. An override created by mistake can be cleared on the Limits page."
)


def _bound_field(what: str) -> forms.IntegerField:
    return forms.IntegerField(
        min_value=1,
        max_value=MAX_BOUND,
        required=False,
        error_messages={
            "invalid": f"The {what} must be a whole number of 1 or more, or empty for no {what} bound.",
            "min_value": f"The {what} must be 1 or more; leave it empty for no {what} bound.",
            "max_value": f"The {what} must be at most {MAX_BOUND:,}.",
        },
    )


class LimitOverrideForm(forms.Form):
    """An override: a limit's name and the bounds it is to have (an empty bound is none)."""

    name = forms.CharField(max_length=200, error_messages={"required": "Name the limit to override."})
    concurrency = _bound_field("concurrency")
    rate = _bound_field("rate")
    period = forms.FloatField(
        required=True,
        error_messages={
            "invalid": "The period must be a number of seconds greater than 0.",
            "required": "The period (seconds) is required: the rate's window.",
        },
    )

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"])
        try:
            return validate_queue_name(name, "limit name")
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def clean_period(self) -> float:
        period = float(self.cleaned_data["period"])
        if not 0 < period < float("inf"):
            raise forms.ValidationError("The period must be a number of seconds greater than 0.")
        return period

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors and data.get("concurrency") is None and data.get("rate") is None:
            raise forms.ValidationError("Give a concurrency, a rate, or both: a limit needs at least one.")
        return data


def bounds_text(values: LimitValues | None) -> str:
    """``"5 at once, 100 per 1 s"``; "none" for a limit nothing declares."""
    return values.describe() if values is not None else "none"


def _errors(form: forms.Form) -> str:
    return " ".join(str(message) for messages_ in form.errors.values() for message in messages_)


class LimitSettingsAdmin(ReadOnlyAdmin):
    """Every limit: declared, overridden, or named by a job or a lease (``monitor.limits_overview``)."""

    def has_change_limits_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CHANGE_LIMITS_PERMISSION)

    def get_urls(self) -> list[URLPattern]:
        def view(function: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(function)

        return [
            path("override/", view(self.override_view), name="backwave_django_limitsettings_override"),
            path("clear/", view(self.clear_view), name="backwave_django_limitsettings_clear"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])  # the forms post to their own URLs
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        overview = monitor.limits_overview(now=clock.now())
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Limits",
            "subtitle": None,
            "bw_breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
            "rows": [_limit_row(limit) for limit in overview.limits],
            "complete": overview.complete,
            "max_lanes": monitor.MAX_LANES,
            "can_change": self.has_change_limits_permission(request),
            "override_url": reverse("admin:backwave_django_limitsettings_override"),
            "clear_url": reverse("admin:backwave_django_limitsettings_clear"),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/backwave_django/limitsettings/limit_list.html", context)

    @console_button(permission=CHANGE_LIMITS_PERMISSION)
    def override_view(self, request: HttpRequest) -> HttpResponse:
        """POST ``name``, ``concurrency``, ``rate`` (empty: no bound) and ``period`` (seconds)."""
        back = SeeOther(reverse("admin:backwave_django_limitsettings_changelist"))
        form = LimitOverrideForm(request.POST)
        if not form.is_valid():
            name = str(request.POST.get("name", ""))[:40]
            text = f"Limit “{name}”: {_errors(form)} Nothing was changed."
            self.message_user(request, text, messages.ERROR)
            return back
        data = form.cleaned_data
        name = data["name"]
        create = request.POST.get("create") == "yes"
        try:
            values = operator.set_limit(
                name,
                concurrency=data["concurrency"],
                rate=data["rate"],
                period=data["period"],
                actor=actors.admin_user(request.user),
                create=create,
            )
        except operator.UnknownLimitError as refusal:
            return self._confirm_unknown(request, refusal, data)
        except (TypeError, ValueError) as error:
            self.message_user(request, f"Limit “{name}”: {error}; nothing was changed.", messages.ERROR)
            return back
        row = self._log(request, name, f"Override limit: {values.describe()}")
        declared = row is None or row.declared_values() is not None
        note = "" if declared else " No worker declares it yet; the override is in force for its jobs."
        self.message_user(
            request, f"Limit “{name}” is now overridden: {values.describe()}.{note}", messages.SUCCESS
        )
        return back

    def _confirm_unknown(
        self, request: HttpRequest, refusal: operator.UnknownLimitError, data: dict[str, Any]
    ) -> HttpResponse:
        """Ask before overriding a limit nothing uses (a typo, most of the time): nothing is stored
        until the page's button posts the same override again with ``create=yes``."""
        name = refusal.name
        bounds = LimitValues(data["concurrency"], data["rate"], data["period"]).describe()
        hint = ""
        if refusal.suggestions:
            hint = " Did you mean " + " or ".join(f"“{known}”" for known in refusal.suggestions) + "?"
        posted = {key: request.POST.get(key, "") for key in ("name", "concurrency", "rate", "period")}
        return confirmation_page(
            self,
            request,
            {
                "title": "Override a limit nothing uses?",
                "bw_lead": (
                    f"No worker declares limit “{name}” and no job uses it; overriding it creates it, "
                    f"in force for its jobs at once.{hint}"
                ),
                "bw_explanation": UNKNOWN_LIMIT_TEXT.format(bounds=bounds),
                "bw_action_url": request.path,
                "bw_fields": [*posted.items(), ("create", "yes")],
                "bw_submit": f"Yes, override “{name}” anyway",
                "bw_back_url": reverse("admin:backwave_django_limitsettings_changelist"),
                "bw_testid": "bw-confirm-unknown-limit",
            },
        )

    @console_button(permission=CHANGE_LIMITS_PERMISSION)
    def clear_view(self, request: HttpRequest) -> HttpResponse:
        """POST ``name``: remove its override (the declared bounds apply again)."""
        back = SeeOther(reverse("admin:backwave_django_limitsettings_changelist"))
        name = str(request.POST.get("name", ""))
        try:
            result = operator.clear_limit(name, actor=actors.admin_user(request.user))
        except (TypeError, ValueError) as error:
            self.message_user(request, f"Limit “{name[:40]}”: {error}; nothing was changed.", messages.ERROR)
            return back
        if result is ClearLimitResult.UNKNOWN_LIMIT:
            text = f"No limit “{name}”: no worker declares it and no override names it; nothing was changed."
            self.message_user(request, text, messages.ERROR)
        elif result is ClearLimitResult.NOT_OVERRIDDEN:
            text = f"Limit “{name}” has no override to clear; nothing was changed."
            self.message_user(request, text, messages.ERROR)
        else:
            self._log(request, name, "Clear limit override")
            text = f"Cleared the override of limit “{name}”: its declared bounds apply."
            self.message_user(request, text, messages.SUCCESS)
        return back

    def _log(self, request: HttpRequest, name: str, message: str) -> LimitSettings | None:
        """A ``LogEntry`` on the limit's row, for its History page (none once the row is gone); the row."""
        row = LimitSettings.objects.filter(name=name).first()
        if row is not None:
            self.log_change(request, row, message)
        return row


def _limit_row(limit: monitor.LimitOverview) -> dict[str, Any]:
    """One limit of the page: its bounds, use and busiest buckets."""
    values = limit.in_force
    return {
        "name": limit.name,
        "declared": bounds_text(limit.declared),
        "override": limit.override.describe() if limit.override else None,
        "overridden_by": limit.overridden_by,
        "overridden_at": limit.overridden_at,
        "in_force": bounds_text(values),
        "undeclared": values is None,
        "leased": limit.leased,
        "started": limit.started,
        "due": limit.due,
        "held": limit.held,
        "buckets_in_use": limit.buckets_in_use,
        # The form starts from the bounds in force.
        "form_concurrency": values.concurrency if values else None,
        "form_rate": values.rate if values else None,
        "form_period": f"{values.period:g}" if values else "1",
        "buckets": [
            {
                "bucket": use.bucket,
                "whole": use.bucket == "",
                "leased": use.leased,
                "concurrency": values.concurrency if values else None,
                "started": use.started,
                "rate": values.rate if values else None,
                "due": use.due,
                "held": use.held,
                "full": use.full,
            }
            for use in limit.buckets
        ],
    }
