"""``manage.py backwave_demo``: fill the database with a realistic mix of jobs and an admin user."""

from __future__ import annotations

import secrets
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...demo import HISTORY, seed

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = (
        "Seed demo data: hours of simulated shop activity (thousands of jobs in every state, "
        "with real transition logs), live work for a running worker, and an 'admin' superuser "
        "whose generated password is printed. Safe to re-run: the history is seeded only into a "
        "database without jobs, and an existing admin user is kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Flush the whole database first (every table, users included: like manage.py flush).",
        )
        parser.add_argument(
            "--orders", type=int, default=1_100, help="Orders in the simulated history (two jobs each)."
        )
        parser.add_argument(
            "--hours",
            type=float,
            default=HISTORY / timedelta(hours=1),
            help="How many hours of history to simulate (default %(default)s; at most 23).",
        )
        parser.add_argument(
            "--live-orders", type=int, default=150, help="Orders due over the next ten minutes."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["orders"] < 0 or options["live_orders"] < 0:
            raise CommandError("--orders and --live-orders take a number >= 0.")
        if options["reset"]:
            call_command("flush", interactive=False, verbosity=0)
            self.stdout.write("Flushed the database.")
        started = time.monotonic()
        history = timedelta(hours=options["hours"])
        if not timedelta(minutes=10) <= history <= timedelta(hours=23):
            raise CommandError("--hours takes a number of hours from 0.17 (ten minutes) to 23.")
        report = seed(orders=options["orders"], live_orders=options["live_orders"], history=history)
        if report.history_seeded:
            self.stdout.write(
                f"Seeded {options['hours']:g} hours of history in {time.monotonic() - started:.1f} s."
            )
        else:
            self.stdout.write(
                "The database already has jobs: history not seeded again (--reset starts over)."
            )
        self.stdout.write(
            f"Added {report.live_jobs:,} jobs for the worker to run now and over the next minutes."
        )
        self.stdout.write(f"Jobs by state ({report.total:,} in all):")
        for state, count in report.counts.items():
            self.stdout.write(f"  {state.label:<16} {count:>7,}")
        self.stdout.write(self._admin_line())

    def _admin_line(self) -> str:
        users = get_user_model()
        if users.objects.filter(username=ADMIN_USERNAME).exists():
            return (
                f"Admin user: {ADMIN_USERNAME}  password: unchanged "
                f"(set one with: manage.py changepassword {ADMIN_USERNAME})"
            )
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(ADMIN_USERNAME, f"{ADMIN_USERNAME}@shop.example", password)
        return f"Admin user: {ADMIN_USERNAME}  password: {password}"
