"""Schedules in the console: the list (cron gloss, next due, live instance), the detail page, and
create / edit / delete through a form validated like ``store.upsert_schedule`` and written only
through ``operator.save_schedule`` / ``operator.remove_schedule``, each audited for the user."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.urls import reverse
from django.utils import timezone

from backwave_django import CatchUp, JobState, ScheduleSpec, store
from backwave_django.models import JobRecord, OperatorAudit, RecurringSchedule

from .conftest import make_staff

pytestmark = pytest.mark.django_db

LIST = "admin:backwave_django_recurringschedule_changelist"
ADD = "admin:backwave_django_recurringschedule_add"
PAYLOAD: dict[str, list[object] | dict[str, object]] = {"args": [], "kwargs": {}}


def _change(schedule_id: str) -> str:
    pk = RecurringSchedule.objects.get(schedule_id=schedule_id).pk
    return reverse("admin:backwave_django_recurringschedule_change", args=[pk])


def _upsert(schedule_id: str = "nightly", cron: str = "0 2 * * *", **fields) -> None:
    spec = ScheduleSpec(schedule_id=schedule_id, cron=cron, wire_name="test.echo", payload=PAYLOAD, **fields)
    store.upsert_schedule(spec, now=timezone.now())


def _form(**overrides) -> dict[str, str]:
    data = {
        "schedule_id": "nightly",
        "cron": "0 2 * * *",
        "wire_name": "test.echo",
        "payload": json.dumps(PAYLOAD),
        "queue": "default",
        "time_zone": "",
        "catch_up": str(int(CatchUp.SKIP)),
        "_save": "Save",
    }
    data.update(overrides)
    return data


@pytest.fixture
def editor(client):
    user = make_staff("add_recurringschedule", "change_recurringschedule", "delete_recurringschedule")
    client.force_login(user)
    return user


# --- The list and the detail page --------------------------------------------------------------


def test_the_list_glosses_the_cron_and_shows_zone_next_due_live_instance_and_skipped_ticks(client, login):
    login()
    _upsert("nightly", "0 2 * * *", time_zone="Europe/Berlin", no_overlap=True)
    _upsert("often", "*/5 * * * *")
    _upsert("odd", "0 8 1-5 * *")
    RecurringSchedule.objects.filter(schedule_id="often").update(
        skipped_ticks=["2026-01-01T00:00:00+00:00"] * 3
    )
    store.trigger_schedule("often", actor="t", now=timezone.now())
    html = client.get(reverse(LIST)).content.decode()
    rows = dict(re.findall(r'<tr>.*?<a href="[^"]+">([a-z]+)</a>(.*?)</tr>', html, re.S))
    assert (
        'Daily at 02:00 <small class="bw-quiet">Europe/Berlin</small><br><code class="bw-raw-cron">0 0 2 * * *</code>'
        in rows["nightly"]
    )
    assert "Every 5 minutes" in rows["often"]
    assert ">UTC<" in rows["often"]
    assert "<code>0 0 8 1-5 * *</code>" in rows["odd"]  # no gloss: the raw expression
    assert "3 skipped ticks" in rows["often"]
    assert 'data-testid="bw-live-instance">live instance<' in rows["often"]  # the triggered one is live
    assert "no live instance" in rows["nightly"]
    assert "Coalesce" not in rows["nightly"]
    assert "no overlap" in rows["nightly"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time> <small class=\"bw-ago\">in ", rows["nightly"])
    assert client.get(reverse(LIST)).context["title"] == "Recurring schedules"


def test_a_schedule_that_no_longer_resolves_shows_its_error(client, login):
    login()
    _upsert("broken")
    RecurringSchedule.objects.filter(schedule_id="broken").update(time_zone="Mars/Olympus")
    assert "Unresolvable time-zone id &#x27;Mars/Olympus&#x27;" in client.get(reverse(LIST)).content.decode()
    html = client.get(_change("broken")).content.decode()
    assert 'data-testid="bw-schedule-error"' in html


def test_the_detail_page_lists_minted_instances_newest_first_and_skipped_ticks(client, login):
    login()
    _upsert()
    t1, t2 = timezone.now(), timezone.now() + timedelta(seconds=1)
    store.trigger_schedule("nightly", actor="t", now=t1)
    store.trigger_schedule("nightly", actor="t", now=t2)
    RecurringSchedule.objects.update(skipped_ticks=["2026-01-01T02:00:00+00:00", "2026-01-02T02:00:00+00:00"])
    html = client.get(_change("nightly")).content.decode()
    instances = html[html.index('id="bw-minted-instances"') :]
    ids = re.findall(r'class="bw-job-id" title="([0-9a-f-]{36})"><code>…[0-9a-f]{8}</code>', instances)
    newest_first = list(
        JobRecord.objects.filter(schedule_id="nightly").order_by("-sequence").values_list("job_id", flat=True)
    )
    assert ids == [str(i) for i in newest_first]
    assert 'href="/admin/backwave_django/jobrecord/?schedule_id=nightly"' in instances
    skipped = html[html.index('id="bw-skipped-ticks"') : html.index('id="bw-minted-instances"')]
    assert skipped.index("2026-01-02 02:00:00 UTC") < skipped.index("2026-01-01 02:00:00 UTC")


# --- Create and edit ---------------------------------------------------------------------------


def test_creating_a_schedule_goes_through_the_store(client, editor):
    before = timezone.now()
    response = client.post(reverse(ADD), _form(cron="30 9 * * 1-5", time_zone="Europe/Berlin"))
    assert response.status_code == 302, response.content.decode()[:3000]
    row = RecurringSchedule.objects.get()
    assert (row.schedule_id, row.cron, row.time_zone, row.wire_name) == (
        "nightly",
        "0 30 9 * * 1-5",
        "Europe/Berlin",
        "test.echo",  # canonical 6-field form: the store's
    )
    assert row.cursor >= before
    assert row.skipped_ticks == []
    assert LogEntry.objects.get().action_flag == ADDITION


def test_editing_a_schedule_keeps_its_cursor_and_skipped_ticks(client, editor):
    _upsert()
    cursor = datetime(2026, 1, 1, tzinfo=UTC)
    RecurringSchedule.objects.update(cursor=cursor, skipped_ticks=["2026-01-01T02:00:00+00:00"])
    response = client.post(_change("nightly"), _form(cron="0 3 * * *", catch_up=str(int(CatchUp.COALESCE))))
    assert response.status_code == 302
    row = RecurringSchedule.objects.get()
    assert (row.cron, row.catch_up, row.cursor, row.skipped_ticks) == (
        "0 0 3 * * *",
        CatchUp.COALESCE,
        cursor,
        ["2026-01-01T02:00:00+00:00"],
    )
    assert LogEntry.objects.get().action_flag == CHANGE


def test_the_admin_never_saves_the_model_itself(client, editor, monkeypatch):
    """Every write of a schedule row happens inside ``store.upsert_schedule``, given the form's spec
    and the acting user (the operator's call: ``operator.save_schedule``)."""
    inside_store, specs, actors, saves = [], [], [], []
    upsert, save = store.upsert_schedule, RecurringSchedule.save

    def spy_upsert(spec, **kwargs):
        specs.append(spec)
        actors.append(kwargs.get("actor"))
        inside_store.append(True)
        try:
            return upsert(spec, **kwargs)
        finally:
            inside_store.pop()

    def spy_save(self, *args, **kwargs):
        saves.append(bool(inside_store))
        return save(self, *args, **kwargs)

    monkeypatch.setattr(store, "upsert_schedule", spy_upsert)
    monkeypatch.setattr(RecurringSchedule, "save", spy_save)
    client.post(reverse(ADD), _form(queue="reports", no_overlap="on", catch_up=str(int(CatchUp.COALESCE))))
    assert saves == [True]
    assert specs == [
        ScheduleSpec(
            schedule_id="nightly",
            cron="0 2 * * *",
            wire_name="test.echo",
            payload=PAYLOAD,
            queue="reports",
            catch_up=CatchUp.COALESCE,
            no_overlap=True,
        )
    ]
    assert actors == [editor.username]


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"cron": "0 25 * * *"}, "cron", "Invalid cron expression &#x27;0 25 * * *&#x27;"),
        ({"cron": "@daily"}, "cron", "Invalid cron expression"),
        ({"cron": "* * *"}, "cron", "must have 5 fields"),
        ({"time_zone": "Mars/Olympus"}, "time_zone", "Unresolvable time-zone id &#x27;Mars/Olympus&#x27;"),
        ({"wire_name": "no.such.job"}, "wire_name", "No job is registered with wire name “no.such.job”"),
        (
            {"payload": json.dumps({"args": [], "kwargs": {"nope": 1}, "x": 2})},
            "payload",
            "would be Quarantined",
        ),
        ({"payload": "{not json"}, "payload", "Enter a valid JSON"),
        ({"schedule_id": ""}, "schedule_id", "This field is required"),
        ({"cron": "0 0 30 2 *"}, "cron", "&#x27;0 0 30 2 *&#x27; never fires: February has no 30th"),
        ({"cron": "0 0 31 4,6 *"}, "cron", "never fires: April and June have no 31st"),
        (
            {"schedule_id": "nightly report"},
            "schedule_id",
            "schedule_id &#x27;nightly report&#x27; is not a valid schedule id: a schedule id is 1 to 128 "
            "characters with no whitespace or control characters; it contains &#x27; &#x27;",
        ),
        ({"schedule_id": "s" * 129}, "schedule_id", "schedule_id is at most 128 characters, got 129"),
        # The form offers the registered jobs only: a longer name cannot be one of them.
        ({"wire_name": "w" * 129}, "wire_name", "No job is registered with wire name “www"),
    ],
)
def test_an_invalid_definition_is_a_clear_form_error_and_nothing_is_saved(
    client, editor, overrides, field, message
):
    response = client.post(reverse(ADD), _form(**overrides))
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert field in form.errors
    assert message in response.content.decode()
    assert not RecurringSchedule.objects.exists()
    assert not LogEntry.objects.exists()


def test_a_duplicate_schedule_id_is_a_form_error(client, editor):
    _upsert()
    response = client.post(reverse(ADD), _form(cron="0 5 * * *"))
    assert response.status_code == 200
    assert "schedule_id" in response.context["adminform"].form.errors
    assert RecurringSchedule.objects.get().cron == "0 0 2 * * *"


def test_a_bad_edit_leaves_the_schedule_as_it_was(client, editor):
    _upsert()
    response = client.post(_change("nightly"), _form(cron="0 2 * * *", time_zone="Nowhere/City"))
    assert response.status_code == 200
    assert RecurringSchedule.objects.get().time_zone is None


def test_schedules_declared_in_settings_are_read_only_here(client, editor):
    spec = ScheduleSpec(schedule_id="declared", cron="0 2 * * *", wire_name="test.echo", payload=PAYLOAD)
    store.upsert_schedule(spec, now=timezone.now(), declared_in_settings=True)
    url = _change("declared")
    html = client.get(url).content.decode()
    assert 'data-testid="bw-declared-in-settings"' in html
    assert 'name="cron"' not in html
    client.post(url, _form(schedule_id="declared", cron="0 4 * * *"))
    assert RecurringSchedule.objects.get().cron == "0 0 2 * * *"


def test_deleting_goes_through_the_store_and_keeps_minted_instances(client, editor):
    _upsert()
    store.trigger_schedule("nightly", actor="t", now=timezone.now())
    pk = RecurringSchedule.objects.get().pk
    response = client.post(
        reverse("admin:backwave_django_recurringschedule_delete", args=[pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not RecurringSchedule.objects.exists()
    assert JobRecord.objects.filter(schedule_id="nightly", state=JobState.SCHEDULED).count() == 1


def test_a_viewer_cannot_add_or_edit(client, login):
    login()
    _upsert()
    assert client.get(reverse(ADD)).status_code == 403
    client.post(_change("nightly"), _form(cron="0 4 * * *"))
    assert RecurringSchedule.objects.get().cron == "0 0 2 * * *"


# --- Every write is an audited operator action --------------------------------------------------


def _audit() -> list[tuple[str, str, str]]:
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target"))


def _bulk_delete(client, *schedule_ids: str):
    selected = [str(RecurringSchedule.objects.get(schedule_id=s).pk) for s in schedule_ids]
    return client.post(
        reverse(LIST),
        {"action": "delete_selected", "index": "0", "_selected_action": selected, "post": "yes"},
    )


def test_creating_a_schedule_writes_one_audit_row_for_the_user(client, editor):
    response = client.post(reverse(ADD), _form())
    assert response.status_code == 302
    assert _audit() == [(editor.username, "save_schedule", "nightly")]


def test_editing_a_schedule_writes_one_audit_row_for_the_user(client, editor):
    _upsert()
    response = client.post(_change("nightly"), _form(cron="0 3 * * *"))
    assert response.status_code == 302
    assert RecurringSchedule.objects.get().cron == "0 0 3 * * *"
    assert _audit() == [(editor.username, "save_schedule", "nightly")]


def test_an_invalid_definition_is_not_audited(client, editor):
    _upsert()
    client.post(reverse(ADD), _form(schedule_id="other", cron="0 25 * * *"))
    client.post(_change("nightly"), _form(time_zone="Nowhere/City"))
    assert _audit() == []


def test_deleting_a_schedule_writes_one_audit_row_for_the_user(client, editor):
    _upsert()
    pk = RecurringSchedule.objects.get().pk
    response = client.post(
        reverse("admin:backwave_django_recurringschedule_delete", args=[pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not RecurringSchedule.objects.exists()
    assert _audit() == [(editor.username, "remove_schedule", "nightly")]


def test_deleting_selected_schedules_writes_one_audit_row_per_schedule(client, editor):
    _upsert("nightly")
    _upsert("hourly", "0 * * * *")
    _upsert("kept", "*/5 * * * *")
    response = _bulk_delete(client, "nightly", "hourly")
    assert response.status_code == 302
    assert list(RecurringSchedule.objects.values_list("schedule_id", flat=True)) == ["kept"]
    assert sorted(_audit()) == [
        (editor.username, "remove_schedule", "hourly"),
        (editor.username, "remove_schedule", "nightly"),
    ]


@pytest.mark.parametrize(
    "codenames",
    [
        (),  # a viewer
        ("add_recurringschedule",),  # may create, not change or delete
        ("add_recurringschedule", "delete_recurringschedule"),  # may not change
        ("add_recurringschedule", "change_recurringschedule"),  # may not delete
    ],
)
def test_without_the_permission_nothing_is_written_or_audited(client, codenames):
    user = make_staff(*codenames)
    client.force_login(user)
    _upsert()
    pk = RecurringSchedule.objects.get().pk
    before = list(RecurringSchedule.objects.values_list("schedule_id", "cron", "cursor"))
    delete_url = reverse("admin:backwave_django_recurringschedule_delete", args=[pk])
    may_change = "change_recurringschedule" in codenames
    may_delete = "delete_recurringschedule" in codenames
    if not may_change:
        assert client.post(_change("nightly"), _form(cron="0 4 * * *")).status_code == 403
    if not may_delete:
        assert client.post(delete_url, {"post": "yes"}).status_code == 403
        response = _bulk_delete(client, "nightly")
        assert response.status_code < 500
    if "add_recurringschedule" not in codenames:
        assert client.post(reverse(ADD), _form(schedule_id="other")).status_code == 403
    assert list(RecurringSchedule.objects.values_list("schedule_id", "cron", "cursor")) == before
    assert _audit() == []


def test_schedule_content_is_escaped(client, login):
    login()
    spec = ScheduleSpec(
        schedule_id="<script>s()</script>", cron="0 2 * * *", wire_name="<b>w</b>", payload=PAYLOAD
    )
    store.upsert_schedule(spec, now=timezone.now())
    for url in (reverse(LIST), _change("<script>s()</script>")):
        html = client.get(url).content.decode()
        assert "<script>s()" not in html
        assert "<b>w</b>" not in html
        assert "&lt;script&gt;s()" in html


@pytest.mark.parametrize("action", ["trigger_selected_schedules_now", "delete_selected"])
@pytest.mark.parametrize("selected", ["abc", "nightly", "1;DROP TABLE x", "99999999999999999999"])
def test_a_malformed_schedule_selection_is_refused_with_a_message_and_changes_nothing(
    client, action, selected
):
    from django.contrib.auth.models import User

    from .conftest import flashed

    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    _upsert("nightly")
    before = list(RecurringSchedule.objects.values_list("schedule_id", "cursor"))
    response = client.post(
        reverse(LIST), {"action": action, "index": "0", "_selected_action": [selected], "post": "yes"}
    )
    assert response.status_code == 302
    assert flashed(response) == [
        f"“{selected[:40]}” is not the id of a recurring schedule listed here; nothing was changed."
    ]
    assert list(RecurringSchedule.objects.values_list("schedule_id", "cursor")) == before
    assert not JobRecord.objects.exists()
    assert not LogEntry.objects.exists()


def test_a_schedule_saved_in_the_admin_mints_under_its_jobs_own_policy(client, editor):
    # test.flaky is declared with max_attempts=3 and backoff=[0]
    client.post(reverse(ADD), _form(wire_name="test.flaky", payload=json.dumps({"args": [1], "kwargs": {}})))
    row = RecurringSchedule.objects.get(schedule_id="nightly")
    assert (row.max_attempts, row.backoff, row.timeout) == (3, [0.0], None)
