"""Shared helpers for the console tests: staff users with exactly the permissions a test names."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages

VIEW_PERMISSIONS = ("view_jobrecord", "view_queuesettings", "view_recurringschedule", "view_workernode")


def make_staff(*codenames: str, view: bool = True) -> User:
    """A staff user with the view permissions (unless ``view=False``) plus exactly ``codenames``."""
    name = "op-" + "-".join(codenames or ("viewer",)) + ("" if view else "-blind")
    user = User.objects.create_user(name, is_staff=True)  # no password: hashing is slow
    wanted = [*(VIEW_PERMISSIONS if view else ()), *codenames]
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="backwave_django", codename__in=wanted)
    )
    return user


@pytest.fixture
def login(client) -> Callable[..., User]:
    """Log the test client in as a fresh staff user with the given permission codenames."""

    def as_staff(*codenames: str) -> User:
        user = make_staff(*codenames)
        client.force_login(user)
        return user

    return as_staff


def flashed(response: Any) -> list[str]:
    """The messages a response queued for the next page, as text (links and markup dropped)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", str(message))) for message in flashed_html(response)]


def flashed_html(response: Any) -> list[str]:
    """The messages a response queued for the next page, as the HTML the page shows."""
    return [str(message) for message in get_messages(response.wsgi_request)]


def named(job_id: uuid.UUID, wire_name: str = "send-invoice") -> str:
    """A job as result messages name it: its wire name and the random end of its id."""
    return f"{wire_name} …{job_id.hex[-8:]}"
