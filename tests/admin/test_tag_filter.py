"""The job list's tag filter: facets with counts, the search box (no JavaScript needed) and its JSON
endpoint (permission, escaping). The monitor reads behind them are tested in tests/monitor."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from backwave_django.admin import job_tags

from ..conftest import enqueue
from .conftest import make_staff

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"
SUGGEST = "admin:backwave_django_jobrecord_tag_suggestions"


def _shown(response):
    return [job.job_id for job in response.context["cl"].result_list]


def _spec(response):
    (spec,) = [spec for spec in response.context["cl"].filter_specs if isinstance(spec, job_tags.TagFilter)]
    return spec


def _facets(response):
    return [(facet["display"], facet["count"]) for facet in _spec(response).facets]


def _params(query_string):
    return {name: values[-1] for name, values in parse_qs(urlsplit(query_string).query).items()}


@pytest.fixture
def tagged():
    jobs = {
        "acme-1": enqueue(queue="mail", tags=["vip", ("tenant", "acme")]),
        "acme-2": enqueue(queue="mail", tags=[("tenant", "acme")]),
        "globex": enqueue(queue="default", tags=["vip", ("tenant", "globex"), ("region", "eu")]),
        "initech": enqueue(queue="default", tags=["urgent", ("tenant", "initech")]),
        "plain": enqueue(queue="mail"),
    }
    return jobs


# --- Facets --------------------------------------------------------------------------------------


def test_without_a_key_the_facets_are_the_labels_with_their_counts(client, login, tagged):
    login()
    response = client.get(reverse(JOBS))
    assert _facets(response) == [("vip", 2), ("urgent", 1)]
    html = response.content.decode()
    assert 'data-testid="bw-tag-facets"' in html
    count = r'href="\?tl=vip">vip\s*<span class="bw-count" data-testid="bw-tag-facet-count">2</span>'
    assert re.search(count, html)
    assert "among the newest 1,000 matching" in html


def test_a_chosen_key_facets_its_values_and_filters_by_any_value(client, login, tagged):
    login()
    response = client.get(reverse(JOBS), {"tk": "tenant"})
    assert _shown(response) == [tagged[name] for name in ("initech", "globex", "acme-2", "acme-1")]
    assert _facets(response) == [("acme", 2), ("globex", 1), ("initech", 1)]
    spec = _spec(response)
    assert spec.any_value == {"selected": True, "query_string": "?tk=tenant"}
    links = [_params(facet["query_string"]) for facet in spec.facets]
    assert links[0] == {"tk": "tenant", "tv": "acme"}


def test_facets_count_among_the_jobs_the_other_filters_select(client, login, tagged):
    login()
    assert _facets(client.get(reverse(JOBS), {"tk": "tenant", "queue": "default"})) == [
        ("globex", 1),
        ("initech", 1),
    ]
    # The chosen value narrows the list but not the facets, which show its alternatives.
    response = client.get(reverse(JOBS), {"tk": "tenant", "tv": "acme", "queue": "mail"})
    assert _shown(response) == [tagged["acme-2"], tagged["acme-1"]]
    assert _facets(response) == [("acme", 2)]
    assert [facet["selected"] for facet in _spec(response).facets] == [True]
    # A facet link keeps the other filters.
    assert _params(_spec(response).facets[0]["query_string"]) == {"queue": "mail", "tk": "tenant", "tv": "acme"}


def test_facets_count_only_among_the_newest_sample(client, login, tagged, monkeypatch):
    login()
    monkeypatch.setattr(job_tags, "FACET_SAMPLE", 2)
    response = client.get(reverse(JOBS), {"tk": "tenant"})
    assert _facets(response) == [("globex", 1), ("initech", 1)]  # the two newest jobs with a tenant
    assert "among the newest 2 matching" in response.content.decode()


def test_a_deep_linked_value_outside_the_sample_is_still_offered(client, login, tagged, monkeypatch):
    login()
    monkeypatch.setattr(job_tags, "FACET_SAMPLE", 1)
    response = client.get(reverse(JOBS), {"tk": "tenant", "tv": "acme"})
    assert _shown(response) == [tagged["acme-2"], tagged["acme-1"]]
    # The sample is the newest job with a tenant (initech); the chosen value is offered uncounted.
    assert _facets(response) == [("initech", 1), ("acme", None)]
    response = client.get(reverse(JOBS), {"tl": "gone"})
    assert _shown(response) == []
    assert _facets(response) == [("urgent", 1), ("gone", None)]  # the newest labelled job: initech
    html = response.content.decode()
    assert re.search(r'<li class="selected" data-testid="bw-tag-facet"><a href="\?tl=gone">gone\s*</a>', html)


def test_a_label_filter_does_not_match_a_keyed_tag_of_the_same_text(client, login):
    login()
    label = enqueue(tags=["acme"])
    enqueue(tags=[("tenant", "acme")])
    assert _shown(client.get(reverse(JOBS), {"tl": "acme"})) == [label]
    assert _shown(client.get(reverse(JOBS), {"tk": "acme"})) == []


def test_the_filter_costs_the_same_queries_however_many_jobs(client, login):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    login()
    enqueue(tags=["label", ("tenant", "t")])
    client.get(reverse(JOBS))
    with CaptureQueriesContext(connection) as few:
        client.get(reverse(JOBS), {"tk": "tenant"})
    for n in range(30):
        enqueue(tags=[f"label-{n % 7}", ("tenant", f"t{n % 3}")])
    with CaptureQueriesContext(connection) as many:
        client.get(reverse(JOBS), {"tk": "tenant"})
    assert len(many) == len(few)
    grouped = [q["sql"] for q in many if "backwave_django_jobtag" in q["sql"] and "GROUP BY" in q["sql"]]
    assert len(grouped) == 1  # the facet: one GROUP BY over the sampled jobs' tags only
    assert "IN (" in grouped[0]


# --- The search box, without JavaScript -----------------------------------------------------------


def test_the_search_box_lists_labels_then_keys_as_links(client, login, tagged):
    login()
    response = client.get(reverse(JOBS), {"tq": "U", "queue": "mail"})
    spec = _spec(response)
    assert [item["display"] for item in spec.suggestions] == ["urgent"]
    response = client.get(reverse(JOBS), {"tq": "", "queue": "mail"})
    items = _spec(response).suggestions
    assert [item["display"] for item in items] == ["urgent", "vip", "region: …", "tenant: …"]
    assert [_params(item["query_string"]) for item in items] == [
        {"queue": "mail", "tl": "urgent"},
        {"queue": "mail", "tl": "vip"},
        {"queue": "mail", "tk": "region"},
        {"queue": "mail", "tk": "tenant"},
    ]
    # The search narrows nothing, and the form keeps the other filters as hidden inputs.
    assert len(_shown(response)) == 3
    assert _spec(response).hidden_inputs == [("queue", "mail")]  # never the search itself
    assert '<input type="hidden" name="queue" value="mail">' in response.content.decode()


def test_with_a_key_chosen_the_search_box_completes_its_values(client, login, tagged):
    login()
    response = client.get(reverse(JOBS), {"tk": "tenant", "tq": "g"})
    items = _spec(response).suggestions
    assert [item["display"] for item in items] == ["tenant: globex"]
    assert _params(items[0]["query_string"]) == {"tk": "tenant", "tv": "globex"}
    html = response.content.decode()
    assert 'data-key="tenant"' in html
    assert '<input type="hidden" name="tk" value="tenant">' in html


def test_a_search_with_no_match_says_so_and_percent_is_literal(client, login, tagged):
    login()
    html = client.get(reverse(JOBS), {"tq": "%"}).content.decode()
    assert "No tag starts with “%”." in html


def test_tags_in_the_filter_are_escaped(client, login):
    login()
    enqueue(tags=["<b>bold</b>", ("<i>k</i>", "<script>v()</script>")])
    html = client.get(reverse(JOBS), {"tq": "<", "tk": ""}).content.decode()
    assert "<b>bold</b>" not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    html = client.get(reverse(JOBS), {"tk": "<i>k</i>", "tq": "<"}).content.decode()
    assert "<script>v()" not in html
    assert "&lt;script&gt;v()" in html
    assert "<i>k</i>" not in html


# --- The JSON endpoint ---------------------------------------------------------------------------


def test_the_endpoint_answers_suggestions_as_json(client, login, tagged):
    login()
    response = client.get(reverse(SUGGEST), {"q": "", "n": "3"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    data = response.json()
    assert data["suggestions"] == [
        {"key": "", "value": "urgent", "text": "urgent", "query": "tl=urgent"},
        {"key": "", "value": "vip", "text": "vip", "query": "tl=vip"},
        {"key": "region", "value": "", "text": "region: …", "query": "tk=region"},
    ]
    assert data["after"] == {"key": "region", "value": ""}
    following = client.get(reverse(SUGGEST), {"q": "", "n": "3", "after_key": "region", "after_value": ""}).json()
    assert following == {
        "suggestions": [{"key": "tenant", "value": "", "text": "tenant: …", "query": "tk=tenant"}],
        "after": None,
    }


def test_the_endpoint_completes_a_keys_values(client, login, tagged):
    login()
    data = client.get(reverse(SUGGEST), {"key": "tenant", "q": "A"}).json()
    assert data == {
        "suggestions": [{"key": "tenant", "value": "acme", "text": "tenant: acme", "query": "tk=tenant&tv=acme"}],
        "after": None,
    }
    labels = client.get(reverse(SUGGEST), {"key": "", "q": "v"}).json()
    assert labels["suggestions"] == [{"key": "", "value": "vip", "text": "vip", "query": "tl=vip"}]


def test_the_endpoint_escapes_markup_and_refuses_bad_input(client, login):
    login()
    enqueue(tags=["<script>alert('x')</script>&co"])
    response = client.get(reverse(SUGGEST), {"q": "<"})
    body = response.content.decode()
    assert "<" not in body
    assert ">" not in body
    assert "&" not in body
    assert "\\u003Cscript\\u003E" in body
    assert json.loads(body)["suggestions"][0]["value"] == "<script>alert('x')</script>&co"
    bad = client.get(reverse(SUGGEST), {"q": "", "after_key": "tenant", "after_value": "acme"})
    assert bad.status_code == 400
    assert "after must be a suggestion" in bad.json()["error"]
    assert client.get(reverse(SUGGEST), {"n": "many"}).status_code == 400
    assert len(client.get(reverse(SUGGEST), {"n": "1000"}).json()["suggestions"]) == 1


def test_the_endpoint_needs_a_staff_login_and_the_view_permission(client, tagged):
    url = reverse(SUGGEST)
    anonymous = client.get(url, {"q": ""})
    assert anonymous.status_code == 302
    assert "/login/" in anonymous["Location"]

    blind = Client()
    blind.force_login(make_staff("view_queuesettings", view=False))
    assert blind.get(url, {"q": ""}).status_code == 403

    viewer = Client()
    viewer.force_login(make_staff())
    assert viewer.get(url, {"q": ""}).status_code == 200
    assert viewer.post(url, {"q": ""}).status_code == 405


def test_the_page_points_its_script_at_the_endpoint(client, login, tagged):
    login()
    html = client.get(reverse(JOBS)).content.decode()
    assert f'data-suggest-url="{reverse(SUGGEST)}"' in html
    assert 'id="bw-tag-suggestions"' in html
