"""The console's own pages draw breadcrumbs in the markup the installed Django's admin styles.

Django 6 styles ``<ol class="breadcrumbs">`` only and Django 5.2 ``<div class="breadcrumbs">`` only,
so each page is compared with a page Django draws itself (the job list's changelist).
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _breadcrumbs(html: str) -> tuple[str, list[str]]:
    """The breadcrumbs element's tag, and its text pieces (links and the current page)."""
    match = re.search(r'<(ol|div) class="breadcrumbs">(.*?)</\1>', html, re.S)
    assert match, "no breadcrumbs"
    pieces = [
        piece.strip() for piece in re.split(r"<[^>]+>|&rsaquo;|\u203a", match.group(2)) if piece.strip()
    ]
    return match.group(1), pieces


@pytest.mark.parametrize(
    ("page", "current"),
    [
        ("admin:backwave_django_dashboard_changelist", "Dashboard"),
        ("admin:backwave_django_queuesettings_changelist", "Queues"),
    ],
)
def test_console_pages_draw_breadcrumbs_like_djangos_own_pages(client, login, page, current):
    login()
    django_tag, django_pieces = _breadcrumbs(
        client.get(reverse("admin:backwave_django_jobrecord_changelist")).content.decode()
    )
    assert django_pieces == ["Home", "Background jobs", "Jobs"]
    html = client.get(reverse(page)).content.decode()
    assert _breadcrumbs(html) == (django_tag, ["Home", "Background jobs", current])
    if django_tag == "ol":
        assert f'<li aria-current="page">{current}</li>' in html
