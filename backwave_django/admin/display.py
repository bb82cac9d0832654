"""How the console shows things, the same way on every page: instants, job ids, badges, JSON, tags.

- **Instants** are shown in Django's current time zone (``TIME_ZONE``, as the rest of the admin),
  to the second and with the zone's name, never broken over lines, and with the time relative
  to now beside them: ``2026-12-01 13:44:09 UTC`` · ``3 min ago`` (:func:`timestamp`). The
  ``<time>`` element carries the UTC instant for machines and as its tooltip.
- **Durations** (an attempt's run time, a queue's latency, a lease's time left) are one format
  in the same units: ``3.25 s``, ``3 min 07 s``, ``2 h 05 min`` (:func:`short_duration`).
- **Job ids** are time-ordered (``core/ids.py``, UUIDv7: the first twelve hex digits are the
  enqueue time), so jobs enqueued together share their start. A short id is the random end of the
  id instead, ``…3f9a12bc`` (:func:`short_job_id`); the full id is its tooltip and copy button.
- **Badges** are coloured pills in the console's tones (:data:`STATE_TONES`).

Everything returned as HTML is built with ``format_html``, so every value shown is escaped.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from .. import clock
from ..core.encoding import json_size
from ..core.states import JobState

#: Badge colours per state, the console's tones: Scheduled amber, Awaiting Parent navy, Leased
#: wave blue, Succeeded green, Cancelled navy, Dead-Lettered and Quarantined red.
STATE_TONES = {
    JobState.SCHEDULED: "#9a6700",
    JobState.AWAITING_PARENT: "#24406b",
    JobState.LEASED: "#1f6feb",
    JobState.SUCCEEDED: "#1a7f37",
    JobState.CANCELLED: "#24406b",
    JobState.DEAD_LETTERED: "#b3261e",
    JobState.QUARANTINED: "#b3261e",
}
PAUSED_TONE = STATE_TONES[JobState.SCHEDULED]
CLAIMING_TONE = STATE_TONES[JobState.SUCCEEDED]
#: A queue whose concurrency limit is 0: nothing is claimed from it, as when it is paused.
BLOCKED_TONE = STATE_TONES[JobState.DEAD_LETTERED]
STALE_TONE = "#6e7781"

#: How many hex digits of a job id the short form shows (the random end of the id).
SHORT_ID_DIGITS = 8

#: The copy button's icon, two overlapping sheets drawn inline: no font glyph for "copy" renders
#: everywhere (U+29C9 is an empty box in common Linux browser fonts). The button carries the label.
COPY_ICON = SafeString(
    '<svg class="bw-copy-icon" width="12" height="12" viewBox="0 0 16 16" aria-hidden="true" '
    'focusable="false"><rect x="5" y="5" width="9.5" height="9.5" rx="1.5" fill="none" '
    'stroke="currentColor" stroke-width="1.6"/><path d="M3 11h-.5A1.5 1.5 0 0 1 1 9.5v-7A1.5 1.5 0 0 '
    '1 2.5 1h7A1.5 1.5 0 0 1 11 2.5V3" fill="none" stroke="currentColor" stroke-width="1.6"/></svg>'
)


# --- Instants and durations ----------------------------------------------------------------------


def format_instant(value: datetime | None) -> str:
    """``2026-12-01 13:44:09 UTC``: the current time zone, to the second, with its name; "—" when unset."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or local.strftime('%z')}"


def relative_time(when: datetime, now: datetime) -> str:
    """``3 min ago``, ``in 45 s``, ``2 h 5 min ago``, ``3 days ago``, or ``now`` within a second."""
    delta = (when - now).total_seconds()
    seconds = int(abs(delta))
    if seconds < 1:
        return "now"
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        text = f"{hours} h {minutes} min" if minutes else f"{hours} h"
    else:
        days = seconds // 86400
        text = f"{days} day{'s' if days != 1 else ''}"
    return f"in {text}" if delta > 0 else f"{text} ago"


def timestamp(
    value: datetime | None, *, now: datetime | None = None, label: str = "", relative: bool = True
) -> str:
    """An instant with its zone and, beside it, how long ago (or ahead) it is; "—" when unset.

    ``label`` starts the relative part (``due in 4 min``, ``ended 3 min ago``); ``relative=False``
    leaves it out (for a cell that shows its own countdown). The instant never breaks (CSS
    ``.bw-time``); in a narrow cell the relative part goes under it.
    """
    if value is None:
        return "—"
    moment = format_html(
        '<time class="bw-time" datetime="{}" title="{}">{}</time>',
        value.astimezone(UTC).isoformat(),
        value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        format_instant(value),
    )
    if not relative:
        return format_html('<span class="bw-when">{}</span>', moment)
    ago = relative_time(value, now or clock.now())
    return format_html(
        '<span class="bw-when">{} <small class="bw-ago">{}</small></span>',
        moment,
        f"{label} {ago}" if label else ago,
    )


def stored_timestamp(text: str | None, *, now: datetime | None = None) -> str:
    """An instant stored as ISO text (a schedule's skipped ticks) shown as :func:`timestamp` shows it."""
    if not text:
        return "—"
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return format_html("<code>{}</code>", text)
    return timestamp(value if value.tzinfo else value.replace(tzinfo=UTC), now=now)


def short_duration(delta: timedelta) -> str:
    """A duration, an age or a countdown, in the units :func:`relative_time` uses, to the useful
    precision: ``0.35 s``, ``45 s``, ``3 min 07 s``, ``2 h 05 min``, ``3 days 4 h``.

    The one duration format of the console (an attempt's run time, a queue's latency, a lease's
    time left, a workflow's age): under ten seconds to the hundredth, as attempts often are.
    """
    total = max(delta.total_seconds(), 0.0)
    if total < 10:
        return f"{total:.2f}".rstrip("0").rstrip(".") + " s"
    seconds = int(total)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} day{'s' if days != 1 else ''} {hours} h"


# --- Job ids -------------------------------------------------------------------------------------


def short_job_id(job_id: uuid.UUID | str) -> str:
    """The random end of a job id after an ellipsis (``…3f9a12bc``): its start is a timestamp."""
    return "…" + str(job_id).replace("-", "")[-SHORT_ID_DIGITS:]


def copy_button(text: str, label: str = "Copy the job id") -> str:
    """A small button that copies ``text`` (the console's script handles ``data-bw-copy``)."""
    return format_html(
        '<button type="button" class="bw-copy" data-bw-copy="{}" title="{}" aria-label="{}">{}</button>',
        text,
        label,
        label,
        COPY_ICON,
    )


def job_link(url: str, job_id: uuid.UUID | str) -> str:
    """A link to a job labelled with its short id; the full id is the tooltip."""
    return format_html(
        '<a href="{}" class="bw-job-id" title="{}"><code>{}</code></a>', url, job_id, short_job_id(job_id)
    )


# --- Badges, JSON, tags --------------------------------------------------------------------------


def tone_badge(text: str, tone: str, **data: str) -> str:
    """A coloured pill with white text; ``data`` become ``data-*`` attributes."""
    attributes = format_html_join("", ' data-{}="{}"', data.items())
    return format_html(
        '<span class="bw-badge"{} style="background:{};color:#fff;padding:1px 7px;border-radius:8px;'
        'white-space:nowrap">{}</span>',
        attributes,
        tone,
        text,
    )


def job_state_badge(state: int) -> str:
    """A job state's badge in its tone, marked ``data-state="<PascalCase name>"``."""
    job_state = JobState(state)
    return tone_badge(str(job_state.label), STATE_TONES[job_state], state=job_state.pascal)


def pretty_json(value: Any) -> str:
    """Indented JSON with its encoded size above it."""
    size = json_size(value)
    return format_html(
        '<div class="bw-json"><small>{} bytes · JSON</small>'
        "<pre style='white-space:pre-wrap;margin:0'>{}</pre></div>",
        f"{size:,}",
        json.dumps(value, indent=2, ensure_ascii=False),
    )


def tag_query(key: str, value: str) -> str:
    """The job-list query string that filters by one tag (a label has ``key == ""``)."""
    return urlencode({"tk": key, "tv": value} if key else {"tl": value})


def tag_pills(tags: Any, base_url: str = "") -> str:
    """Each tag as a link to the job list filtered by it; "—" for none."""
    return (
        format_html_join(
            " ",
            '<a class="bw-tag" href="{}?{}">{}</a>',
            ((base_url, tag_query(tag.key, tag.value), str(tag)) for tag in tags),
        )
        or "—"
    )
