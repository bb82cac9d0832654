"""The Limits page (admin/limits.py): limits, buckets and held counts; override and clear forms."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from backwave_django import store
from backwave_django.core.limits import LimitValues
from backwave_django.core.states import JobState
from backwave_django.models import LimitSettings, OperatorAudit

from ..flow_rows import declare, job_under, leased, started
from .conftest import flashed

pytestmark = pytest.mark.django_db

LIMITS = "admin:backwave_django_limitsettings_changelist"
OVERRIDE = "admin:backwave_django_limitsettings_override"
CLEAR = "admin:backwave_django_limitsettings_clear"


def _row(html: str, name: str) -> str:
    match = re.search(rf'<tr data-limit="{re.escape(name)}" data-testid="bw-limit">(.*?)</tr>\s*(?=<tr data-limit|</tbody>\s*</table>\s*</div>)', html, re.S)
    assert match, f"no row for {name!r}"
    return match.group(1)


@pytest.fixture
def limits():
    """"customer-sync" (1 at once): bucket acme full with 2 held, globex free; "payment-api"
    (2 per 10 s): 2 started in the window, 1 held; "ghost": named by a job, declared by nobody."""
    now = timezone.now()
    declare("customer-sync", concurrency=1, at=now)
    declare("payment-api", rate=2, period=10, at=now)
    leased("customer-sync", "acme", job_under((("customer-sync", "acme"),), state=JobState.LEASED, due=now))
    for _ in range(2):
        job_under((("customer-sync", "acme"),), due=now)
    job_under((("customer-sync", "globex"),), due=now)
    started("payment-api", "", at=now, times=2)
    job_under((("payment-api", ""),), due=now)
    job_under((("ghost", "x"),), due=now)
    return now


def test_the_page_lists_each_limit_with_its_bounds_use_and_busiest_buckets(client, login, limits):
    login("view_limitsettings")
    html = client.get(reverse(LIMITS)).content.decode()
    assert re.findall(r'<tr data-limit="([^"]+)" data-testid="bw-limit">', html) == [
        "customer-sync",
        "ghost",
        "payment-api",
    ]
    sync = _row(html, "customer-sync")
    assert re.search(r'data-testid="bw-limit-declared">1 at once<', sync)
    assert re.search(r'data-testid="bw-limit-held">2 <small class="bw-quiet">of 3 due', sync)
    assert re.findall(r'data-bucket="([^"]+)"', sync) == ["acme", "globex"]
    assert re.search(r'data-bucket="acme" class="bw-failing">.*?data-testid="bw-bucket-leased">1 / 1<.*?data-testid="bw-bucket-held">2<', sync, re.S)
    payment = _row(html, "payment-api")
    assert re.search(r'data-testid="bw-limit-started">2<', payment)
    assert "<em>whole limit</em>" in payment
    assert re.search(r'data-testid="bw-bucket-started">2 / 2<', payment)
    assert "not declared by any worker" in _row(html, "ghost")
    # A viewer sees no forms.
    assert "bw-override" not in html
    assert "bw-clear-override" not in html


def test_viewing_needs_the_view_permission(client, login, limits):
    login()  # the other pages' view permissions, not this one's
    assert client.get(reverse(LIMITS)).status_code == 403


def test_change_limits_shows_the_forms_and_an_override_is_audited_and_shown(client, login, limits):
    user = login("view_limitsettings", "change_limits")
    html = client.get(reverse(LIMITS)).content.decode()
    assert 'data-testid="bw-override-form"' in _row(html, "customer-sync")
    assert 'data-testid="bw-override-new"' in html
    response = client.post(
        reverse(OVERRIDE), {"name": "customer-sync", "concurrency": "3", "rate": "", "period": "1"}
    )
    assert response.status_code == 303
    assert flashed(response) == ["Limit “customer-sync” is now overridden: 3 at once."]
    row = LimitSettings.objects.get(name="customer-sync")
    assert row.values_in_force() == LimitValues(3, None, 1.0)
    assert row.overridden_by == user.get_username()
    assert list(OperatorAudit.objects.values_list("action", "target")) == [("set_limit", "customer-sync")]
    assert LogEntry.objects.filter(object_repr="customer-sync").count() == 1
    html = client.get(reverse(LIMITS)).content.decode()
    sync = _row(html, "customer-sync")
    assert re.search(r'data-testid="bw-limit-in-force">3 at once', sync)
    assert f"overridden by {user.get_username()}" in sync
    assert 'data-testid="bw-clear-override"' in sync
    assert re.search(r'data-testid="bw-limit-held">0 ', sync)  # acme has room now

    response = client.post(reverse(CLEAR), {"name": "customer-sync"})
    assert flashed(response) == ["Cleared the override of limit “customer-sync”: its declared bounds apply."]
    assert LimitSettings.objects.get(name="customer-sync").values_in_force() == LimitValues(1, None, 1.0)
    assert [a for a, in OperatorAudit.objects.order_by("id").values_list("action")] == ["set_limit", "clear_limit"]


def test_a_limit_only_jobs_name_is_overridden_without_confirmation(client, login, limits):
    login("view_limitsettings", "change_limits")
    response = client.post(reverse(OVERRIDE), {"name": "ghost", "concurrency": "", "rate": "5", "period": "2"})
    assert flashed(response) == [
        "Limit “ghost” is now overridden: 5 per 2 s. No worker declares it yet; the override is in "
        "force for its jobs."
    ]
    html = client.get(reverse(LIMITS)).content.decode()
    assert "not declared by any worker" not in _row(html, "ghost")


def test_an_undeclared_limit_may_be_overridden_by_name(client, login, limits):
    """A name nothing uses (a typo of "payment-api") asks first; only the confirmation creates it."""
    login("view_limitsettings", "change_limits")
    posted = {"name": "paymnet-api", "concurrency": "", "rate": "5", "period": "2"}
    response = client.post(reverse(OVERRIDE), posted)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="bw-confirm-unknown-limit"' in html
    assert (
        "No worker declares limit “paymnet-api” and no job uses it; overriding it creates it, in force "
        "for its jobs at once. Did you mean “payment-api”?"
    ) in html
    assert "Confirming stores the override 5 per 2 s under this name" in html
    assert f'action="{reverse(OVERRIDE)}"' in html
    for name, value in [*posted.items(), ("create", "yes")]:
        assert f'<input type="hidden" name="{name}" value="{value}">' in html
    assert "Yes, override “paymnet-api” anyway" in html
    assert not LimitSettings.objects.filter(name="paymnet-api").exists()
    assert not OperatorAudit.objects.exists()
    assert not LogEntry.objects.exists()

    response = client.post(reverse(OVERRIDE), {**posted, "create": "yes"})
    assert response.status_code == 303
    assert flashed(response) == [
        "Limit “paymnet-api” is now overridden: 5 per 2 s. No worker declares it yet; the override is in "
        "force for its jobs."
    ]
    assert LimitSettings.objects.get(name="paymnet-api").values_in_force() == LimitValues(None, 5, 2.0)
    assert list(OperatorAudit.objects.values_list("action", "target")) == [("set_limit", "paymnet-api")]
    html = client.get(reverse(LIMITS)).content.decode()
    assert re.search(r'data-testid="bw-limit-in-force">5 per 2 s', _row(html, "paymnet-api"))


def test_the_confirmation_escapes_the_name_and_a_bad_confirmed_post_is_still_refused(client, login, limits):
    login("view_limitsettings", "change_limits")
    evil = "<b>x</b>"
    html = client.post(reverse(OVERRIDE), {"name": evil, "rate": "5", "period": "1"}).content.decode()
    assert 'data-testid="bw-confirm-unknown-limit"' in html
    assert evil not in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert not LimitSettings.objects.filter(name=evil).exists()
    # create=yes does not get past the form: a bad bound is refused all the same.
    response = client.post(reverse(OVERRIDE), {"name": "later", "rate": "0", "period": "1", "create": "yes"})
    assert flashed(response)[-1].endswith("Nothing was changed.")
    assert not LimitSettings.objects.filter(name="later").exists()
    assert not OperatorAudit.objects.exists()


def test_viewers_cannot_override_or_clear(client, login, limits):
    store.set_limit("payment-api", rate=1, actor="setup", now=limits)
    OperatorAudit.objects.all().delete()
    login("view_limitsettings")
    assert client.post(reverse(OVERRIDE), {"name": "payment-api", "rate": "9", "period": "1"}).status_code == 403
    assert client.post(reverse(CLEAR), {"name": "payment-api"}).status_code == 403
    assert client.get(reverse(CLEAR)).status_code == 405
    assert LimitSettings.objects.get(name="payment-api").values_in_force() == LimitValues(None, 1, 10.0)
    assert not OperatorAudit.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "customer-sync", "concurrency": "two", "period": "1"}, "The concurrency must be a whole number"),
        ({"name": "customer-sync", "concurrency": "1.5", "period": "1"}, "The concurrency must be a whole number"),
        ({"name": "customer-sync", "concurrency": "0", "period": "1"}, "The concurrency must be 1 or more"),
        ({"name": "customer-sync", "rate": "5", "period": "0"}, "The period must be a number of seconds greater than 0"),
        ({"name": "customer-sync", "rate": "5", "period": "-3"}, "The period must be a number of seconds greater than 0"),
        ({"name": "customer-sync", "rate": "5", "period": "soon"}, "The period must be a number of seconds"),
        ({"name": "customer-sync", "rate": "5", "period": "inf"}, "The period must be a number of seconds"),
        ({"name": "customer-sync", "period": "1"}, "Give a concurrency, a rate, or both"),
        ({"name": "a b", "rate": "5", "period": "1"}, "is not a valid queue name"),
        ({"rate": "5", "period": "1"}, "Name the limit to override"),
    ],
)
def test_unparseable_input_is_refused_and_changes_nothing(client, login, limits, data, message):
    login("view_limitsettings", "change_limits")
    response = client.post(reverse(OVERRIDE), data)
    assert response.status_code == 303
    [text] = flashed(response)
    assert message in text
    assert text.endswith("Nothing was changed.")
    assert LimitSettings.objects.get(name="customer-sync").values_in_force() == LimitValues(1, None, 1.0)
    assert not OperatorAudit.objects.exists()


def test_clearing_an_unknown_or_not_overridden_limit_is_refused(client, login, limits):
    login("view_limitsettings", "change_limits")
    [text] = flashed(client.post(reverse(CLEAR), {"name": "custmer-sync"}))
    assert text == "No limit “custmer-sync”: no worker declares it and no override names it; nothing was changed."
    text = flashed(client.post(reverse(CLEAR), {"name": "customer-sync"}))[-1]
    assert text == "Limit “customer-sync” has no override to clear; nothing was changed."
    text = flashed(client.post(reverse(CLEAR), {}))[-1]
    assert "nothing was changed" in text
    assert not OperatorAudit.objects.exists()


def test_markup_in_limit_and_bucket_names_is_escaped(client, login):
    now = timezone.now()
    evil = "<script>x()</script>"
    declare(evil, concurrency=1, at=now)
    leased(evil, "<b>acme</b>", job_under(((evil, "<b>acme</b>"),), state=JobState.LEASED, due=now))
    job_under(((evil, "<b>acme</b>"),), due=now)
    store.set_limit(evil, concurrency=1, actor="<i>mallory</i>", now=now)
    login("view_limitsettings", "change_limits")
    html = client.get(reverse(LIMITS)).content.decode()
    assert evil not in html
    assert "<b>acme</b>" not in html
    assert "<i>mallory</i>" not in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html
    assert "&lt;b&gt;acme&lt;/b&gt;" in html
    client.post(reverse(CLEAR), {"name": "<img src=x>"})
    html = client.get(reverse(LIMITS)).content.decode()  # the message is shown here
    assert "&lt;img src=x&gt;" in html
    assert "<img src=x>" not in html


def test_a_held_jobs_page_says_what_holds_it(client, login, limits):
    login("view_jobrecord")
    held = job_under((("customer-sync", "acme"),), due=limits)
    free = job_under((("customer-sync", "globex"),), due=limits)
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[held.pk])).content.decode()
    assert re.search(
        r'data-testid="bw-summary-held" role="status"><strong>Held by limit customer-sync, bucket acme \(1 / 1 leased\)</strong>',
        html,
    )
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[free.pk])).content.decode()
    assert "bw-summary-held" not in html
    ghost = job_under((("ghost", "x"),), due=limits)
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[ghost.pk])).content.decode()
    assert "limit ghost is not declared by any worker" in html


def test_the_audit_log_names_the_limit_and_links_the_limits_page(client, login, limits):
    store.set_limit("payment-api", rate=5, actor="alice", now=limits)
    login("view_operatoraudit")
    html = client.get(reverse("admin:backwave_django_operatoraudit_changelist")).content.decode()
    assert f'limit <a href="{reverse(LIMITS)}">payment-api</a>' in html


def test_the_limits_page_is_titled_and_in_the_app_index(client, login, limits):
    login("view_limitsettings")
    html = client.get(reverse(LIMITS)).content.decode()
    assert "<title>Limits | " in html
    index = client.get(reverse("admin:app_list", args=["backwave_django"])).content.decode()
    assert f'href="{reverse(LIMITS)}"' in index
