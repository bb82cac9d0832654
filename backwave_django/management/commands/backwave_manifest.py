"""``manage.py backwave_manifest``: record or check the wire format of every registered job.

See :mod:`backwave_django.manifest` for what is recorded and why. Exit status: 0 when the file
matches (``--check``) or was written (``--write``); 1 when the registered jobs differ from the
file; 2 when the file is missing or unreadable under ``--check``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import manifest
from ...registry import definitions


def default_path() -> Path:
    """``backwave_manifest.json`` next to the project (``settings.BASE_DIR``), else in the current dir."""
    base_dir = getattr(settings, "BASE_DIR", None)
    return Path(base_dir or Path.cwd()) / manifest.DEFAULT_FILENAME


class Command(BaseCommand):
    help = (
        "Record (--write) or verify (--check) the wire format of every registered job in "
        f"{manifest.DEFAULT_FILENAME}: wire names, handler parameters and default queues. "
        "Without a flag, print the manifest. --check exits 1 with a diff and a summary of what "
        "each change does to rows already enqueued."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group()
        action.add_argument(
            "--check",
            action="store_true",
            help="Compare the registered jobs with the file; exit 1 and show what changed if they differ.",
        )
        action.add_argument("--write", action="store_true", help="Write the file from the registered jobs.")
        parser.add_argument(
            "--path",
            type=Path,
            help=f"The manifest file (default: {manifest.DEFAULT_FILENAME} in settings.BASE_DIR, "
            "or in the current directory).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"] or default_path()
        built = manifest.build(definitions())
        current = manifest.render(built)
        if options["write"]:
            path.write_text(current, encoding="utf-8")
            count = len(built["jobs"])
            self.stdout.write(self.style.SUCCESS(f"Wrote the wire format of {count} job(s) to {path}."))
        elif options["check"]:
            self._check(path, current)
        else:
            self.stdout.write(current, ending="")

    def _check(self, path: Path, current: str) -> None:
        if not path.exists():
            raise CommandError(
                f"{path} does not exist. Create it with `manage.py backwave_manifest --write` and "
                "commit it, or point --path at the committed file.",
                returncode=2,
            )
        committed = path.read_text(encoding="utf-8")
        try:
            old = manifest.parse(committed)
        except manifest.ManifestError as exc:
            raise CommandError(
                f"{path} is not a backwave manifest: {exc}. Rewrite it with "
                "`manage.py backwave_manifest --write`.",
                returncode=2,
            ) from None
        changes = manifest.compare(old, manifest.parse(current))
        if not changes and manifest.render(old) == current:
            self.stdout.write(self.style.SUCCESS(f"{path} matches the registered jobs."))
            return
        self.stdout.write(manifest.diff(manifest.render(old), current, str(path)))
        breaking = [c for c in changes if c.breaking]
        self.stdout.write("")
        if breaking:
            self.stdout.write(self.style.ERROR("Changes that break rows already enqueued:"))
            for change in breaking:
                self.stdout.write(f"  - {change}")
        others = [c for c in changes if not c.breaking]
        if others:
            self.stdout.write("Other changes:")
            for change in others:
                self.stdout.write(f"  - {change}")
        raise CommandError(
            f"The registered jobs differ from {path} ({len(breaking)} breaking change(s), "
            f"{len(others)} other). If the change is intended (and rows of the old format have "
            "drained or been handled), run `manage.py backwave_manifest --write` and commit the file.",
            returncode=1,
        )
