"""Template tags of the operator console: ``{% load backwave_console %}``.

- ``{% job_results cl %}`` draws the job list's table like Django's ``{% result_list cl %}``, plus
  the line the list draws under each row (a failure's cause, a retry's last failure: see
  ``admin/job_list.py``, ``JobChangeList``).
- ``{{ value|bw_when }}`` shows an instant as every console page does: with its zone, never broken,
  and how long ago it was (``admin/display.py``, ``timestamp``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.contrib.admin.templatetags.admin_list import result_list
from django.contrib.admin.views.main import ChangeList

from ..admin.display import timestamp

register = template.Library()


@register.inclusion_tag("admin/backwave_django/jobrecord/change_list_results.html")
def job_results(cl: ChangeList) -> dict[str, Any]:
    """Django's result list, each row paired with the line drawn under it (or None)."""
    context: dict[str, Any] = dict(result_list(cl))
    detail = getattr(cl, "bw_detail", None)
    headers: list[dict[str, Any]] = context["result_headers"]
    checkbox = bool(headers) and "action-checkbox-column" in str(headers[0].get("class_attrib", ""))
    rows = [
        (result, detail(job) if detail is not None else None)
        for result, job in zip(context["results"], cl.result_list, strict=True)
    ]
    return {**context, "bw_rows": rows, "bw_checkbox": checkbox, "bw_span": len(headers) - int(checkbox)}


@register.filter
def bw_when(value: datetime | None) -> str:
    """An instant with its zone and how long ago (or ahead) it is; "—" when unset."""
    return timestamp(value)
