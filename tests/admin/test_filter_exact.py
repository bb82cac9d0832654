"""A filter is exact or refused (core/job_filter.py, docs/admin.md): on the job list every parameter
it cannot read is named in a message and the list shows no jobs, never all of them; an action over
the whole filter is refused for such a filter, states the filter in words, and acts only on the
filter and the count its signed token confirmed."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, operator, store
from backwave_django.admin import job_bulk
from backwave_django.core.job_filter import JobFilter, parse
from backwave_django.models import JobRecord, OperatorAudit

from ..conftest import LEASE, enqueue, report
from .conftest import flashed

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"
JOB_LINK = 'class="bw-job-link"'

#: Each filter the list cannot read, and what its message must say.
BAD_FILTERS = [
    ({"priority": "abc"}, "“priority=abc”: expected above, normal, below, or a priority from -100 to 100"),
    ({"retrying": "maybe"}, "“retrying=maybe”: expected 1 (jobs waiting for a retry)"),
    ({"terminal_class": "7"}, "“terminal_class=7”: expected a terminal class: 0 (Succeeded or Cancelled)"),
    ({"tk": "", "tv": "x"}, "“tv=x”: expected a tag value, with tk (its key) given too"),
    ({"state__exact": "banana"}, "“state__exact=banana”: expected a job state: 0 (Scheduled)"),
    ({"foo": "bar"}, "“foo=bar”: expected one of the list's filters (state__exact, retrying"),
    ({"workflow_id": "nope"}, "“workflow_id=nope”: expected a workflow id (a UUID)"),
    ({"queue": "billing", "o": "name"}, "“o=name”: expected a column number to sort by"),
]
BAD_IDS = [
    "priority",
    "retrying",
    "terminal_class",
    "tag-value-without-key",
    "state",
    "unknown",
    "workflow",
    "o",
]


def _all(action: str, params: dict[str, str]) -> str:
    return reverse("admin:backwave_django_jobrecord_all", args=[action]) + "?" + urlencode(params)


def _pending(count: int, queue: str = "billing") -> list:
    return [enqueue(queue=queue, priority=5) for _ in range(count)]


def _token(page) -> str:
    match = re.search(r'<input type="hidden" name="token" value="([^"]+)">', page.content.decode())
    assert match, page.content.decode()[:2000]
    return match.group(1)


def _states(ids) -> set[int]:
    return set(JobRecord.objects.filter(job_id__in=ids).values_list("state", flat=True))


def _errors(response) -> list[str]:
    return [message for message in flashed(response) if message.startswith("Filter not understood")]


@pytest.mark.parametrize(("params", "says"), BAD_FILTERS, ids=BAD_IDS)
def test_a_filter_the_list_cannot_read_is_named_and_shows_no_jobs(client, login, params, says):
    _pending(3)
    login("cancel_jobrecord", "requeue_jobrecord")
    response = client.get(reverse(JOBS), params)
    assert response.status_code == 200  # the list itself, not a redirect to all jobs
    html = response.content.decode()
    assert html.count(JOB_LINK) == 0
    errors = _errors(response)
    assert any(says in message for message in errors), errors
    assert 'data-testid="bw-all-' not in html  # no action over a filter that did not read


@pytest.mark.parametrize(("params", "says"), BAD_FILTERS, ids=BAD_IDS)
@pytest.mark.parametrize("method", ["get", "post"])
def test_an_action_over_a_filter_that_does_not_read_is_refused_and_changes_nothing(
    client, login, params, says, method
):
    ids = _pending(3)
    login("cancel_jobrecord")
    # A token signed for the filter as if it had read (the parameters that did not read dropped).
    token = job_bulk._token(job_bulk.ACTIONS["cancel"], parse([]), JobRecord.objects.latest("pk").pk, 3)
    url = _all("cancel", params)
    if method == "get":
        response = client.get(url)
    else:
        response = client.post(url, {"confirm": "yes", "token": token, "beyond_limit": "yes"})
    assert response.status_code == 303
    assert response["Location"] == reverse(JOBS) + "?" + urlencode(params)
    assert any(
        "Cancel refused: the filter is not understood; nothing was changed." in m for m in flashed(response)
    )
    assert _states(ids) == {JobState.SCHEDULED}
    assert not OperatorAudit.objects.exists()
    # The list it leads back to names what did not read.
    assert any(says in message for message in _errors(client.get(response["Location"])))


def test_a_page_beyond_the_last_is_named_and_shows_no_jobs(client, login):
    _pending(3)
    login()
    response = client.get(reverse(JOBS), {"p": "9999"})
    assert response.status_code == 200
    assert response.content.decode().count(JOB_LINK) == 0
    [message] = _errors(response)
    assert "“p=9999”: expected a page from 1 to 1" in message
    [message] = _errors(client.get(reverse(JOBS), {"p": "abc"}))
    assert "“p=abc”: expected a page number from 1" in message


def test_djangos_invalid_filter_flag_shows_no_jobs_either(client, login):
    _pending(2)
    login()
    response = client.get(reverse(JOBS), {"e": "1"})
    assert response.content.decode().count(JOB_LINK) == 0
    assert _errors(response)


def test_a_parameter_given_twice_with_different_values_is_refused(client, login):
    _pending(2, queue="a")
    login()
    response = client.get(reverse(JOBS) + "?queue=a&queue=b")
    assert response.content.decode().count(JOB_LINK) == 0
    assert "“queue=a & b”: expected one value (it was given several)" in _errors(response)[0]


@pytest.mark.parametrize(
    "params",
    [
        {"o": "-1"},
        {"o": "1", "p": "1"},
        {"queue": "billing", "_changelist_filters": "queue=billing"},
        {"_popup": "1"},
        {"all": ""},
        {"priority": "5"},
        {"priority": "above", "tq": "ten"},
    ],
    ids=["order", "order-and-page", "changelist-filters", "popup", "show-all", "one-priority", "tag-search"],
)
def test_djangos_own_parameters_and_good_filters_still_list_the_jobs(client, login, params):
    _pending(3)
    login()
    response = client.get(reverse(JOBS), params)
    assert response.status_code == 200
    assert not _errors(response)
    assert response.content.decode().count(JOB_LINK) == 3


def test_one_priority_filters_exactly(client, login):
    five = _pending(2)
    enqueue(queue="billing", priority=4)
    login()
    assert client.get(reverse(JOBS), {"priority": "5"}).content.decode().count(JOB_LINK) == len(five)


# --- Actions over the whole filter ---------------------------------------------------------------


def test_the_confirmation_states_the_filter_in_words(client, login):
    _pending(2)
    login("cancel_jobrecord")
    params = {"state__exact": "0", "queue": "billing", "priority": "5"}
    html = client.get(_all("cancel", params)).content.decode()
    assert "Filter: state is Scheduled, queue is billing, priority is 5." in html
    assert "Cancel: 2 jobs matching this filter." in html


def test_a_token_altered_or_made_for_another_filter_is_refused_and_changes_nothing(client, login):
    billing = _pending(2)
    other = _pending(3, queue="mail")
    login("cancel_jobrecord", "requeue_jobrecord")
    token = _token(client.get(_all("cancel", {"queue": "billing"})))
    for url, sent in [
        (_all("cancel", {"queue": "mail"}), token),  # the filter altered after the confirmation
        (_all("cancel", {"queue": "billing"}), token[:-3] + ("abc" if not token.endswith("abc") else "xyz")),
        (_all("retry-now", {"queue": "billing"}), token),  # another action
    ]:
        response = client.post(url, {"confirm": "yes", "token": sent})
        assert response.status_code in (200, 303)
        assert _states(billing + other) == {JobState.SCHEDULED}
    assert not OperatorAudit.objects.exists()
    refused = client.post(_all("cancel", {"queue": "mail"}), {"confirm": "yes", "token": token})
    html = refused.content.decode()
    assert "The confirmation does not match this filter" in " ".join(flashed(refused)) or (
        "The confirmation does not match this filter" in html
    )
    assert "Cancel: 3 jobs matching this filter." in html  # asked again, for the filter in the URL


def test_a_token_signed_for_a_larger_snapshot_cannot_widen_the_action(client, login):
    ids = _pending(2)
    later = _pending(1)
    login("cancel_jobrecord")
    forged = signing.dumps(
        {"action": "cancel", "filter": JobFilter(queue="billing").canonical(), "through": 1, "count": 2},
        salt="not-the-salt",
    )
    client.post(_all("cancel", {"queue": "billing"}), {"confirm": "yes", "token": forged})
    assert _states(ids + later) == {JobState.SCHEDULED}


def test_when_the_count_changed_since_the_confirmation_it_asks_again_with_the_new_count(client, login):
    ids = _pending(3)
    login("cancel_jobrecord")
    url = _all("cancel", {"queue": "billing"})
    token = _token(client.get(url))
    operator.cancel(ids[0], actor="someone-else")  # one of them no longer matches
    audits = OperatorAudit.objects.count()
    response = client.post(url, {"confirm": "yes", "token": token})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Cancel: 2 jobs matching this filter." in html
    assert _states(ids[1:]) == {JobState.SCHEDULED}
    assert OperatorAudit.objects.count() == audits
    # Confirmed again, with the new page's token, it acts.
    client.post(url, {"confirm": "yes", "token": _token(response)})
    assert _states(ids) == {JobState.CANCELLED}


def test_the_changed_count_message_names_both_counts(client, login):
    now = timezone.now()
    ids = [enqueue(now=now, queue="dl") for _ in range(3)]
    store.claim(worker_id="w", queues=["dl"], max_jobs=3, lease_duration=LEASE, now=now)
    for job_id in ids:
        report(job_id, Failure(next_due_time=None, error="card declined"), now=now, worker="w")
    login("requeue_jobrecord")
    url = _all("requeue", {"state__exact": str(int(JobState.DEAD_LETTERED))})
    token = _token(client.get(url))
    operator.requeue(ids[0], actor="someone-else")
    response = client.post(url, {"confirm": "yes", "token": token})
    assert "The filter now matches 2 jobs, not the 3 confirmed; nothing was changed." in " ".join(
        flashed(response)
    )
