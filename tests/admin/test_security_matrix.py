"""Security review of the operator console, as tests.

- **Permissions**: every URL the app registers in the admin (discovered from
  ``admin.site.get_urls()``, so pages and buttons added later are covered too) is requested by an
  anonymous visitor, an active staff user with no permissions, a staff user holding each single
  permission of the app, and a superuser. Nobody gets a 5xx; anonymous visitors are sent to the
  login page; nobody sees rows of a model they may not view; payload, output and failure detail
  need ``view_sensitive_jobrecord``.
- **Actions**: every state-changing POST (bulk actions and per-object buttons) changes nothing
  without its permission (the table in SECURITY.md, "Who can do what in the admin"), and acts
  with it.
- **CSRF**: every POST without a token is refused with 403 and changes nothing.
- **Escaping**: markup in every user-controlled value is shown escaped on every page.
- **No code from data**: payloads are JSON data only; the package never unpickles or evaluates.
- **The sensitive gate** and its environment kill-switch.
"""

from __future__ import annotations

import ast
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.http import QueryDict
from django.test import Client
from django.urls import URLPattern, URLResolver
from django.utils import timezone

import backwave_django
from backwave_django import Failure, JobState, NewJob, ScheduleSpec, Success, store
from backwave_django.admin import job_bulk
from backwave_django.core import job_filter
from backwave_django.models import (
    JobRecord,
    LimitSettings,
    Observer,
    ObserverDeadLetter,
    OperatorAudit,
    QueueSettings,
    RecurringSchedule,
    WorkerNode,
)
from tests.jobsapp import jobs

from ..conftest import LEASE
from ..faults.conftest import snapshot
from ..flow_rows import declare, job_under, leased

pytestmark = pytest.mark.django_db

APP = "backwave_django"
LOGIN = "/admin/login/"

# --- The world: one row of everything, each carrying a marker --------------------------------

SENSITIVE_MARKERS = ("bw-sentinel-payload", "bw-sentinel-output", "bw-sentinel-detail", "bw-sentinel-note")


@dataclass(frozen=True)
class World:
    pending: JobRecord
    finished: JobRecord
    dead: JobRecord
    waiting: JobRecord  # failed once, waiting for its next try
    queue: QueueSettings
    schedule: RecurringSchedule
    worker: WorkerNode
    audit: OperatorAudit
    observer: Observer
    dead_letter: ObserverDeadLetter
    limit: LimitSettings
    #: A due job its limit holds (its bucket is full).
    held: JobRecord

    def object_for(self, model_name: str) -> Any:
        return {
            "jobrecord": self.dead,
            "queuesettings": self.queue,
            "recurringschedule": self.schedule,
            "workernode": self.worker,
            "operatoraudit": self.audit,
            "observer": self.observer,
            "observerdeadletter": self.dead_letter,
            "limitsettings": self.limit,
        }.get(model_name)


def build_world(mark: str) -> World:
    """Rows of every model; ``mark`` is put into every user-controlled value."""
    now = timezone.now()
    finished = (
        jobs.echo.using(tags=[f"{mark}-tag", ("tenant", f"{mark}-tenant")]).enqueue(f"{mark}-payload").job_id
    )
    dead = jobs.echo.using(queue=f"{mark}-dlq").enqueue().job_id
    pending = jobs.echo.using(run_after=timedelta(days=1)).enqueue().job_id
    # A wire name no handler has (as a row written by another deployment would carry).
    store.enqueue(
        NewJob(job_id=uuid.uuid4(), wire_name=f"{mark}-wire", payload={}, due_time=now + timedelta(days=1)),
        now=now,
    )
    now = timezone.now()  # after the enqueues, so that they are due
    claimed = store.claim(
        worker_id=f"{mark}-lease",
        queues=["default", f"{mark}-dlq"],
        max_jobs=5,
        lease_duration=LEASE,
        now=now,
    )
    assert {c.job_id for c in claimed} == {finished, dead}
    store.report_outcome(
        backwave_django.OutcomeReport(
            job_id=finished,
            worker_id=f"{mark}-lease",
            attempt=1,
            outcome=Success(),
            output=f"{mark}-output",
            added_tags=(f"{mark}-added",),
        ),
        now=now,
    )
    store.report_outcome(
        backwave_django.OutcomeReport(
            job_id=dead,
            worker_id=f"{mark}-lease",
            attempt=1,
            outcome=Failure(next_due_time=None, error=f"{mark}-cause"),
            failure_detail=f"RuntimeError: {mark}-detail",
            progress={"done": 3, "total": 4, "note": f"{mark}-note", "at": "2026-01-01T00:00:00Z"},
        ),
        now=now,
    )
    waiting = jobs.echo.using(queue=f"{mark}-retry").enqueue().job_id
    now = timezone.now()  # after the enqueue, so that it is due
    [claimed_waiting] = store.claim(
        worker_id=f"{mark}-lease", queues=[f"{mark}-retry"], max_jobs=1, lease_duration=LEASE, now=now
    )
    assert claimed_waiting.job_id == waiting
    store.report_outcome(
        backwave_django.OutcomeReport(
            job_id=waiting,
            worker_id=f"{mark}-lease",
            attempt=1,
            outcome=Failure(next_due_time=now + timedelta(days=1), error=f"{mark}-cause"),
            failure_detail=f"RuntimeError: {mark}-detail",
        ),
        now=now,
    )
    store.pause_queue(f"{mark}-queue", actor=f"{mark}-actor", now=now)
    store.upsert_schedule(
        ScheduleSpec(
            schedule_id=f"{mark}-schedule",
            cron="0 3 * * *",
            wire_name="test.echo",
            payload={"args": [f"{mark}-schedule-payload"], "kwargs": {}},
        ),
        now=now,
    )
    # A limit with a full bucket holding a due job, overridden by an operator.
    declare(f"{mark}-limit", concurrency=1, at=now)
    bucket = ((f"{mark}-limit", f"{mark}-bucket"),)
    leased(f"{mark}-limit", f"{mark}-bucket", job_under(bucket, state=JobState.LEASED, due=now), at=now)
    held = job_under(bucket, due=now)
    store.set_limit(f"{mark}-limit", concurrency=1, actor=f"{mark}-limiter", now=now)
    store.register_worker(
        worker_id=f"{mark}-worker",
        hostname=f"{mark}-host",
        pid=4242,
        queues=[f"{mark}-queue"],
        concurrency=3,
        now=now,
    )
    return World(
        pending=JobRecord.objects.get(job_id=pending),
        finished=JobRecord.objects.get(job_id=finished),
        dead=JobRecord.objects.get(job_id=dead),
        waiting=JobRecord.objects.get(job_id=waiting),
        queue=QueueSettings.objects.get(queue=f"{mark}-queue"),
        schedule=RecurringSchedule.objects.get(schedule_id=f"{mark}-schedule"),
        worker=WorkerNode.objects.get(worker_id=f"{mark}-worker"),
        audit=OperatorAudit.objects.get(actor=f"{mark}-actor"),
        # Written directly: on PostgreSQL the log is numbered only after a transaction ends.
        observer=Observer.objects.create(
            observer_id=f"{mark}-observer", states=[int(s) for s in JobState], queue=f"{mark}-dlq"
        ),
        dead_letter=ObserverDeadLetter.objects.create(
            observer_id=f"{mark}-observer",
            position=7,
            job_id=dead,
            ordinal=2,
            state=JobState.DEAD_LETTERED,
            attempt=1,
            delivery_attempts=3,
            dead_lettered_at=now,
        ),
        limit=LimitSettings.objects.get(name=f"{mark}-limit"),
        held=held,
    )


@pytest.fixture
def world() -> World:
    return build_world("bw-sentinel")


# --- URL discovery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One admin URL pattern of the app: ``/admin/{prefix}{route}`` with its parameters."""

    model: str  # the model name of the ModelAdmin it belongs to ("" for the app index)
    route: str
    name: str | None

    def url(self, world: World) -> str:
        obj = world.object_for(self.model)

        def fill(match: re.Match[str]) -> str:
            parameter = match.group(1)
            if parameter == "queue":
                return str(world.queue.queue)
            return str(obj.pk if obj is not None else 1)

        return "/admin/" + re.sub(r"<(?:\w+:)?(\w+)>", fill, self.route)


def discover_routes() -> list[Route]:
    """Every URL pattern the app's ModelAdmins (and pages such as the dashboard) register."""
    routes = [Route(model="", route=f"{APP}/", name="app_list")]
    for top in admin.site.get_urls():
        prefix = str(top.pattern)
        if not isinstance(top, URLResolver) or not prefix.startswith(f"{APP}/"):
            continue
        model = prefix.split("/")[1]
        for pattern in top.url_patterns:
            if isinstance(pattern, URLPattern):
                routes.append(Route(model=model, route=prefix + str(pattern.pattern), name=pattern.name))
    return routes


def _all_codenames() -> list[str]:
    codenames = []
    for model in apps.get_app_config(APP).get_models():
        opts = model._meta
        codenames += [f"{action}_{opts.model_name}" for action in opts.default_permissions]
        codenames += [codename for codename, _ in opts.permissions]
    return sorted(codenames)


ALL_CODENAMES = _all_codenames()
SPEC_PERMISSIONS = {
    "cancel_jobrecord",
    "requeue_jobrecord",
    "view_sensitive_jobrecord",
    "trigger_recurringschedule",
    "pause_queuesettings",
    "change_limits",
}


def test_the_app_defines_every_spec_permission_and_the_matrix_sees_the_console():
    assert set(ALL_CODENAMES) >= SPEC_PERMISSIONS
    names = {route.name for route in discover_routes()}
    for model in (
        "jobrecord",
        "queuesettings",
        "recurringschedule",
        "workernode",
        "operatoraudit",
        "observer",
        "observerdeadletter",
        "limitsettings",
    ):
        assert f"{APP}_{model}_changelist" in names
        assert f"{APP}_{model}_change" in names


# --- Users ------------------------------------------------------------------------------------


def _staff(username: str, *codenames: str) -> User:
    user = User.objects.create(username=username, is_staff=True)  # no password: hashing is slow
    user.user_permissions.set(Permission.objects.filter(content_type__app_label=APP, codename__in=codenames))
    return user


def _client_for(role: str) -> tuple[Client, set[str] | None]:
    """A logged-in client for ``role`` and its permissions (None = superuser, all)."""
    client = Client()
    if role == "anonymous":
        return client, set()
    if role == "superuser":
        client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
        return client, None
    codenames = () if role == "staff-no-perms" else (role,)
    client.force_login(_staff(f"u-{role}", *codenames))
    return client, set(codenames)


ROLES = ["anonymous", "staff-no-perms", *ALL_CODENAMES, "superuser"]

#: Markers of rows, and the models whose viewers may see them. Django lets ``change_*`` view too,
#: and a ``delete_*`` confirmation page names the object. Schedule ids are also on the job rows
#: they minted (and in the jobs list's schedule filter), so job viewers see them; worker ids are a
#: leased job's ``lease_owner`` and on the dashboard's health panel (which needs ``view_jobrecord``).
ROW_MARKERS = {
    "bw-sentinel-worker": {"workernode", "jobrecord"},
    "bw-sentinel-actor": {"operatoraudit"},
    "bw-sentinel-schedule": {"recurringschedule", "jobrecord"},
    "bw-sentinel-observer": {"observer", "observerdeadletter"},
    # The limit's name (and its overriding actor, "bw-sentinel-limiter"): on the Limits page, in
    # the audit log, and on the page of the job it holds.
    "bw-sentinel-limit": {"limitsettings", "operatoraudit", "jobrecord"},
}


def _may_see(perms: set[str] | None, marker: str) -> bool:
    if perms is None:
        return True
    if marker in SENSITIVE_MARKERS:
        viewer = perms & {"view_jobrecord", "change_jobrecord"}
        return bool(viewer) and "view_sensitive_jobrecord" in perms
    return any(
        f"{action}_{model}" in perms
        for model in ROW_MARKERS[marker]
        for action in ("view", "change", "delete")
    )


@pytest.mark.parametrize("role", ROLES)
def test_every_page_answers_each_role_without_5xx_or_data_it_may_not_see(role: str, world: World) -> None:
    client, perms = _client_for(role)
    before = snapshot()
    for route in discover_routes():
        url = route.url(world)
        response = client.get(url)
        assert response.status_code < 500, (role, url, response.status_code)
        if role == "anonymous":
            assert response.status_code == 302, (url, response.status_code)
            assert response["Location"].startswith(LOGIN), (url, response["Location"])
            continue
        if response.status_code != 200:
            continue
        body = response.content.decode()
        for marker in (*SENSITIVE_MARKERS, *ROW_MARKERS):
            if marker in body:
                assert _may_see(perms, marker), f"{role} sees {marker} on {url}"
        if perms is not None and not any(p.startswith(("view_", "change_", "delete_")) for p in perms):
            # Without any view permission no page shows a row of the app.
            assert "bw-sentinel" not in body, (role, url)
    assert snapshot() == before  # GETs never change anything


@pytest.mark.parametrize(
    ("codename", "url_name", "marker"),
    [
        ("view_jobrecord", "jobrecord_changelist", "bw-sentinel-dlq"),
        ("view_queuesettings", "queuesettings_changelist", "bw-sentinel-queue"),
        ("view_recurringschedule", "recurringschedule_changelist", "bw-sentinel-schedule"),
        ("view_workernode", "workernode_changelist", "bw-sentinel-worker"),
        ("view_operatoraudit", "operatoraudit_changelist", "bw-sentinel-actor"),
        ("view_limitsettings", "limitsettings_changelist", "bw-sentinel-limit"),
    ],
)
def test_each_view_permission_shows_its_own_rows(
    codename: str, url_name: str, marker: str, world: World
) -> None:
    client, _ = _client_for(codename)
    response = client.get(f"/admin/{APP}/{url_name.rsplit('_', 1)[0]}/")
    assert response.status_code == 200
    assert marker in response.content.decode()


# --- State-changing POSTs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Post:
    """A POST that acts on the world when allowed; ``needs`` is the permission that gates it (SECURITY.md)."""

    id: str
    needs: str
    url: str
    data: dict[str, Any]
    #: Bulk actions live on a changelist, which also needs the model's view permission.
    view: str | None = None


def _posts(world: World) -> list[Post]:
    base = f"/admin/{APP}"
    queue = world.queue.queue
    return [
        Post("cancel-button", "cancel_jobrecord", f"{base}/jobrecord/{world.pending.pk}/cancel/", {}),
        Post("requeue-button", "requeue_jobrecord", f"{base}/jobrecord/{world.dead.pk}/requeue/", {}),
        Post(
            "cancel-action",
            "cancel_jobrecord",
            f"{base}/jobrecord/",
            {"action": "cancel_selected_jobs", "_selected_action": [world.pending.pk]},
            view="view_jobrecord",
        ),
        Post(
            "requeue-action",
            "requeue_jobrecord",
            f"{base}/jobrecord/",
            {"action": "requeue_selected_jobs", "_selected_action": [world.dead.pk]},
            view="view_jobrecord",
        ),
        Post("retry-now-button", "requeue_jobrecord", f"{base}/jobrecord/{world.waiting.pk}/retry-now/", {}),
        Post(
            "retry-now-action",
            "requeue_jobrecord",
            f"{base}/jobrecord/",
            {"action": "retry_selected_jobs_now", "_selected_action": [world.waiting.pk]},
            view="view_jobrecord",
        ),
        Post(
            "trigger-button",
            "trigger_recurringschedule",
            f"{base}/recurringschedule/{world.schedule.pk}/trigger/",
            {},
        ),
        Post(
            "trigger-action",
            "trigger_recurringschedule",
            f"{base}/recurringschedule/",
            {"action": "trigger_selected_schedules_now", "_selected_action": [world.schedule.pk]},
            view="view_recurringschedule",
        ),
        # The world's queue has only settings (and a worker): acting on it takes the confirmation.
        Post("pause-button", "pause_queuesettings", f"{base}/queuesettings/{queue}/pause/", {"create": "yes"}),
        Post("resume-button", "pause_queuesettings", f"{base}/queuesettings/{queue}/resume/", {"create": "yes"}),
        Post(
            "limit-button",
            "pause_queuesettings",
            f"{base}/queuesettings/{queue}/limit/",
            {"limit": "3", "create": "yes"},
        ),
        Post(
            "bulk-pause",
            "pause_queuesettings",
            f"{base}/queuesettings/bulk/",
            {"action": "pause", "queue": [queue], "create": "yes"},
        ),
        Post("remove-button", "pause_queuesettings", f"{base}/queuesettings/{queue}/remove/", {}),
        Post(
            "override-limit",
            "change_limits",
            f"{base}/limitsettings/override/",
            {"name": world.limit.name, "concurrency": "3", "rate": "", "period": "1"},
        ),
        Post("clear-limit", "change_limits", f"{base}/limitsettings/clear/", {"name": world.limit.name}),
        # Actions over a whole filter: the filter in the URL, the confirmation in the body.
        Post(
            "requeue-all",
            "requeue_jobrecord",
            f"{base}/jobrecord/all/requeue/?state__exact=5",
            {"confirm": "yes", "token": _signed("requeue", "state__exact=5", world.dead.pk)},
            view="view_jobrecord",
        ),
        Post(
            "retry-now-all",
            "requeue_jobrecord",
            f"{base}/jobrecord/all/retry-now/?retrying=1",
            {"confirm": "yes", "token": _signed("retry-now", "retrying=1", world.waiting.pk)},
            view="view_jobrecord",
        ),
        Post(
            "cancel-all",
            "cancel_jobrecord",
            f"{base}/jobrecord/all/cancel/?{urlencode({'q': str(world.pending.job_id)})}",
            {
                "confirm": "yes",
                "token": _signed("cancel", urlencode({"q": str(world.pending.job_id)}), world.pending.pk),
            },
            view="view_jobrecord",
        ),
    ]


def _signed(action: str, query: str, through: int) -> str:
    """The token the confirmation page of an action over the whole filter would carry: the jobs
    ``query`` selects up to ``through`` that the action applies to, counted."""
    chosen = job_bulk.ACTIONS[action]
    parsed = job_filter.parse(QueryDict(query).lists())
    jobs = JobRecord.objects.filter(chosen.applies_to, pk__lte=through)
    if parsed.filter.state is not None:
        jobs = jobs.filter(state=parsed.filter.state)
    if parsed.filter.retrying:
        jobs = jobs.filter(state=JobState.SCHEDULED, attempt__gte=1)
    if parsed.filter.search:
        jobs = jobs.filter(job_id=parsed.filter.search)
    return job_bulk._token(chosen, parsed, through, jobs.count())


POST_IDS = [
    "cancel-button",
    "requeue-button",
    "cancel-action",
    "requeue-action",
    "retry-now-button",
    "retry-now-action",
    "trigger-button",
    "trigger-action",
    "pause-button",
    "resume-button",
    "limit-button",
    "bulk-pause",
    "remove-button",
    "override-limit",
    "clear-limit",
    "requeue-all",
    "retry-now-all",
    "cancel-all",
]


def _backwave_rows() -> dict[str, Any]:
    """The app's own tables (the admin's LogEntry rows are Django's and are left out)."""
    return snapshot()


def _staff_client(username: str, *codenames: str) -> Client:
    client = Client()
    client.force_login(_staff(username, *codenames))
    return client


@pytest.mark.parametrize("post_id", POST_IDS)
def test_each_action_needs_its_own_permission_and_works_with_it(post_id: str, world: World) -> None:
    post = next(p for p in _posts(world) if p.id == post_id)
    # No permission, and every permission of the app but the right one at once (the view permission a
    # bulk action's list needs included): whatever other permission a faulty check asked for, or none,
    # that user holds it, so one request refutes them all.
    refused: list[tuple[str, ...]] = [(), tuple(c for c in ALL_CODENAMES if c != post.needs)]
    for index, codenames in enumerate(refused):
        client = _staff_client(f"refused-{index}", *codenames)
        before = _backwave_rows()
        response = client.post(post.url, post.data)
        assert response.status_code < 500, (codenames, response.status_code)
        assert _backwave_rows() == before, f"{codenames} could {post.id}"
    granted = (post.needs, post.view) if post.view else (post.needs,)
    client = _staff_client("granted", *granted)
    before = _backwave_rows()
    response = client.post(post.url, post.data)
    assert response.status_code < 500
    after = _backwave_rows()
    assert after != before, f"{granted} could not {post.id}"
    audits = after["backwave_django_operatoraudit"]
    new = [row for row in audits if row not in before["backwave_django_operatoraudit"]]
    assert new, f"{post.id} wrote no audit row"
    assert {row[1] for row in new} == {"granted"}  # the actor is the acting user's username


def test_anonymous_posts_change_nothing_and_lead_to_the_login_page(world: World) -> None:
    client = Client()
    before = _backwave_rows()
    for post in _posts(world):
        response = client.post(post.url, post.data)
        assert response.status_code == 302, post.id
        assert response["Location"].startswith(LOGIN), post.id
    assert _backwave_rows() == before


def test_gets_to_action_endpoints_change_nothing(world: World) -> None:
    client, _ = _client_for("superuser")
    before = _backwave_rows()
    for post in _posts(world):
        if post.url.endswith("/"):
            response = client.get(post.url, post.data)
            assert response.status_code < 500, post.id
    assert _backwave_rows() == before


def test_rows_are_never_added_changed_or_deleted_as_raw_rows(world: World) -> None:
    """Jobs, queues, workers and audit rows have no add/change/delete views that write."""
    client, _ = _client_for("superuser")
    before = _backwave_rows()
    for model in (
        "jobrecord",
        "queuesettings",
        "workernode",
        "operatoraudit",
        "observer",
        "observerdeadletter",
        "limitsettings",
    ):
        obj = world.object_for(model)
        for url in (f"/admin/{APP}/{model}/add/", f"/admin/{APP}/{model}/{obj.pk}/change/"):
            response = client.post(url, {"state": 3, "queue": "x", "actor": "x", "payload": "{}"})
            assert response.status_code in (200, 302, 403), (url, response.status_code)
        response = client.post(f"/admin/{APP}/{model}/{obj.pk}/delete/", {"post": "yes"})
        assert response.status_code in (302, 403), model
        response = client.post(
            f"/admin/{APP}/{model}/",
            {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"},
        )
        assert response.status_code < 500
    assert _backwave_rows() == before


# --- CSRF -------------------------------------------------------------------------------------


def test_every_post_without_a_csrf_token_is_refused_and_changes_nothing(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    before = _backwave_rows()
    urls = {post.url: post.data for post in _posts(world)}
    urls.update({route.url(world): {} for route in discover_routes()})
    for url, data in urls.items():
        response = client.post(url, data)
        assert response.status_code == 403, (url, response.status_code)
        assert b"CSRF" in response.content, url
    assert _backwave_rows() == before


def test_a_post_with_the_token_from_the_page_is_accepted(world: World) -> None:
    """The other half of the CSRF check: the console's own forms carry a working token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    page = client.get(f"/admin/{APP}/jobrecord/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    response = client.post(
        f"/admin/{APP}/jobrecord/{world.pending.pk}/cancel/", {"csrfmiddlewaretoken": token.group(1)}
    )
    assert response.status_code in (302, 303)
    assert JobRecord.objects.get(pk=world.pending.pk).state == JobState.CANCELLED


# --- Escaping ---------------------------------------------------------------------------------

XSS = "\"'><script>alert('bw-xss')</script>"
RAW = "<script>alert('bw-xss')"


def test_markup_in_every_user_controlled_value_is_shown_escaped() -> None:
    world = build_world(XSS)
    client, _ = _client_for("superuser")
    pages = [route.url(world) for route in discover_routes()]
    pages += [
        f"/admin/{APP}/jobrecord/{world.finished.pk}/change/",
        f"/admin/{APP}/jobrecord/{world.dead.pk}/change/",
        f"/admin/{APP}/jobrecord/{world.held.pk}/change/",
        f"/admin/{APP}/jobrecord/?q={XSS}",
        f"/admin/{APP}/jobrecord/?retrying=1",
        f"/admin/{APP}/jobrecord/?queue={XSS}-dlq",
        f"/admin/{APP}/jobrecord/?tag={XSS}-tag",
        f"/admin/{APP}/operatoraudit/?q={XSS}",
    ]
    shown = 0
    for url in pages:
        response = client.get(url, follow=True)
        assert response.status_code < 500, url
        body = response.content.decode()
        assert RAW not in body, f"unescaped markup on {url}"
        shown += body.count("&lt;script&gt;alert(")
    assert shown > 0  # the values were rendered (escaped), not just absent


def test_every_kind_of_value_reaches_a_page_escaped() -> None:
    world = build_world(XSS)
    client, _ = _client_for("superuser")
    escaped = "&lt;script&gt;alert(&#x27;bw-xss&#x27;)&lt;/script&gt;"
    expectations = {
        f"/admin/{APP}/jobrecord/{world.finished.pk}/change/": ["-payload", "-output", "-tag", "-added"],
        f"/admin/{APP}/jobrecord/{world.dead.pk}/change/": ["-detail", "-cause", "-dlq", "-lease", "-note"],
        f"/admin/{APP}/jobrecord/{world.waiting.pk}/change/": ["-detail", "-retry"],
        f"/admin/{APP}/jobrecord/?retrying=1": ["-detail", "-retry"],
        f"/admin/{APP}/jobrecord/": ["-wire", "-dlq", "-tag"],
        f"/admin/{APP}/queuesettings/": ["-queue"],
        f"/admin/{APP}/recurringschedule/": ["-schedule"],
        f"/admin/{APP}/workernode/": ["-worker"],
        f"/admin/{APP}/operatoraudit/": ["-actor"],
    }
    for url, suffixes in expectations.items():
        body = client.get(url).content.decode()
        for suffix in suffixes:
            assert escaped + suffix in body, (url, suffix)


# --- No code from data ------------------------------------------------------------------------

PACKAGE = Path(backwave_django.__file__).parent
FORBIDDEN_CALLS = {
    ("pickle", "loads"),
    ("pickle", "load"),
    ("pickle", "Unpickler"),
    ("cPickle", "loads"),
    ("marshal", "loads"),
    ("marshal", "load"),
    ("shelve", "open"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("dill", "loads"),
    ("jsonpickle", "decode"),
}
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "jsonpickle", "cloudpickle"}


def _violations(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom):
            found += [
                f"{filename}:{node.lineno} imports {node.module}.{alias.name}"
                for alias in node.names
                if (node.module, alias.name) in FORBIDDEN_CALLS
            ]
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            )
            found += [
                f"{filename}:{node.lineno} imports {m}"
                for m in modules
                if m.split(".")[0] in FORBIDDEN_MODULES
            ]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS:
            found.append(f"{filename}:{node.lineno} calls {func.id}()")
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in FORBIDDEN_CALLS
        ):
            found.append(f"{filename}:{node.lineno} calls {func.value.id}.{func.attr}()")
    return found


def test_the_scanner_finds_what_it_looks_for():
    sample = "import pickle\nfrom yaml import load\npickle.loads(b'')\neval('1')\nexec('x=1')\nyaml.load(s)\n"
    assert len(_violations(sample, "sample.py")) == 6


def test_the_package_never_unpickles_evaluates_or_executes_data():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 20
    violations = [
        v for path in sources for v in _violations(path.read_text(), str(path.relative_to(PACKAGE)))
    ]
    assert violations == []


@pytest.mark.django_db(transaction=True)
def test_a_pickle_looking_payload_is_only_data(tmp_path: Path) -> None:
    """A payload that *looks* like a pickle, or names ``__reduce__``, is stored and handed to the
    handler as plain JSON strings and dicts; running it executes nothing."""
    from tests.worker.conftest import Workers

    canary = tmp_path / "pwned"
    pickled = f"cos\nsystem\n(S'touch {canary}'\ntR."
    reduce_like = {"__reduce__": ["os.system", [f"touch {canary}"]], "py/object": "os.system"}
    job_id = jobs.echo.enqueue(pickled, reduce_like, code="__import__('os').system('true')").job_id
    stored = JobRecord.objects.get(job_id=job_id).payload
    assert stored == {"args": [pickled, reduce_like], "kwargs": {"code": "__import__('os').system('true')"}}
    result = Workers(tmp_path).run("--burst", "--queues", "default", timeout=60)
    assert result.returncode == 0, result.stderr
    assert store.job_output(job_id) == {
        "args": [pickled, reduce_like],
        "kwargs": {"code": "__import__('os').system('true')"},
    }
    assert not canary.exists()


# --- The sensitive gate -----------------------------------------------------------------------


@pytest.fixture
def sensitive_client(world: World) -> Client:
    client, _ = _client_for("view_jobrecord")
    user = User.objects.get(username="u-view_jobrecord")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label=APP, codename="view_sensitive_jobrecord")
    )
    return client


def _sensitive_shown(client: Client, world: World) -> list[str]:
    """The sensitive markers on the job pages, the job list and the Retrying view (which shows the
    first line of a failure detail)."""
    urls = [f"/admin/{APP}/jobrecord/{job.pk}/change/" for job in (world.finished, world.dead, world.waiting)]
    urls += [f"/admin/{APP}/jobrecord/", f"/admin/{APP}/jobrecord/?retrying=1"]
    bodies = "".join(client.get(url).content.decode() for url in urls)
    return [marker for marker in SENSITIVE_MARKERS if marker in bodies]


def test_sensitive_content_is_shown_with_the_permission(
    sensitive_client: Client, world: World, monkeypatch: Any
) -> None:
    monkeypatch.delenv("BACKWAVE_DISABLE_SENSITIVE_DATA", raising=False)
    assert _sensitive_shown(sensitive_client, world) == list(SENSITIVE_MARKERS)


def test_sensitive_content_is_hidden_without_the_permission(world: World, monkeypatch: Any) -> None:
    monkeypatch.delenv("BACKWAVE_DISABLE_SENSITIVE_DATA", raising=False)
    client, _ = _client_for("view_jobrecord")
    assert _sensitive_shown(client, world) == []
    body = client.get(f"/admin/{APP}/jobrecord/{world.dead.pk}/change/").content.decode()
    assert "bw-sentinel-cause" in body  # terminal causes and tags are not sensitive


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "Yes", "on", "ON", " on "])
def test_the_kill_switch_hides_sensitive_content_even_with_the_permission(
    sensitive_client: Client, world: World, monkeypatch: Any, value: str
) -> None:
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", value)
    assert _sensitive_shown(sensitive_client, world) == []
    superuser, _ = _client_for("superuser")
    assert _sensitive_shown(superuser, world) == []


@pytest.mark.parametrize("value", ["0", "false", "off", "no", "", "disabled"])
def test_other_kill_switch_values_do_not_hide_anything(
    sensitive_client: Client, world: World, monkeypatch: Any, value: str
) -> None:
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", value)
    assert _sensitive_shown(sensitive_client, world) == list(SENSITIVE_MARKERS)


def test_a_random_job_id_in_a_url_reveals_nothing(world: World) -> None:
    client, _ = _client_for("superuser")
    response = client.get(f"/admin/{APP}/jobrecord/{uuid.uuid4()}/change/", follow=True)
    assert response.status_code < 500
    assert "bw-sentinel" not in response.content.decode()


@pytest.fixture(autouse=True)
def _no_kill_switch(monkeypatch: Any) -> None:
    monkeypatch.delenv("BACKWAVE_DISABLE_SENSITIVE_DATA", raising=False)
