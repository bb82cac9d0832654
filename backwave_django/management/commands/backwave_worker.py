"""``manage.py backwave_worker``: run a worker process (or, with ``--processes``, several)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from django.core.checks import Tags
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...checks import WORKER_TAG
from ...conf import BackWaveSettings, get_settings
from ...core.dispatch import Dispatch, StrictDispatch, WeightedDispatch, parse_weights
from ...database import jobs_database
from ...registry import definitions


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {value}")
    return value


class Command(BaseCommand):
    help = (
        "Run a backwave_django worker: claim due jobs from the database, run their handlers, "
        "record outcomes. Stops claiming on SIGTERM/SIGINT and waits for running jobs; a second "
        "signal exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            help="Comma-separated queues to serve, in strict priority order "
            "(default: every queue of a registered job, plus 'default').",
        )
        parser.add_argument(
            "--weighted",
            metavar="QUEUE=WEIGHT,...",
            help="Serve queues by smooth weighted round-robin instead, e.g. a=6,b=3,c=1.",
        )
        parser.add_argument(
            "--concurrency",
            type=_positive_int,
            help="Execution slots (default: BACKWAVE['CONCURRENCY'], 20).",
        )
        parser.add_argument(
            "--processes",
            type=_positive_int,
            default=1,
            help="Run N worker processes under a supervisor that restarts a crashed child.",
        )
        parser.add_argument("--burst", action="store_true", help="Process everything due now, then exit 0.")
        parser.add_argument(
            "--give-up-after",
            type=_seconds,
            metavar="S",
            help="Exit with status 4 once database calls have failed for S seconds in a row "
            "(default: 60 with --burst; without it, never: the worker waits for the database).",
        )
        parser.add_argument("--max-jobs", type=_positive_int, help="Exit after N jobs (process recycling).")
        parser.add_argument(
            "--name", help="Worker name prefix; worker ids are {name or host}:{pid}:{random}."
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=_seconds,
            default=30.0,
            help="Seconds to wait for running jobs after SIGTERM/SIGINT; jobs still running then are "
            "given back (Scheduled again, due now, no attempt spent; default 30).",
        )
        parser.add_argument(
            "--metrics-port",
            type=_port,
            help="Serve Prometheus metrics at /metrics and a liveness check at /healthz on this port "
            "(with --processes N, process k serves port+k). Needs backwave-django[prometheus].",
        )
        parser.add_argument(
            "--metrics-host",
            default="127.0.0.1",
            help="Address the metrics endpoint listens on (default 127.0.0.1; 0.0.0.0 in a container).",
        )

    def _dispatch(self, options: dict[str, Any]) -> Dispatch:
        if options["queues"] is not None and options["weighted"] is not None:
            raise CommandError("--queues and --weighted are alternatives; give one of them.")
        try:
            if options["weighted"] is not None:
                return WeightedDispatch(parse_weights(options["weighted"]))
            if options["queues"] is not None:
                queues = [q.strip() for q in options["queues"].split(",") if q.strip()]
            else:
                queues = sorted({d.queue for d in definitions().values()} | {"default"})
            return StrictDispatch(queues)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def handle(self, *args: Any, **options: Any) -> None:
        from ...worker.supervisor import Supervisor, can_fork, child_command, fork_worker, spawn_command

        if not options.get("skip_checks"):
            # Django leaves the database checks (SKIP LOCKED, server version, SQLite transaction
            # mode) out of the checks every command runs; a worker is about to use that database,
            # and to run handlers on this interpreter (checks.WORKER_TAG).
            self.check(
                tags=[Tags.database, WORKER_TAG], include_deployment_checks=True, databases=[jobs_database()]
            )
        settings = get_settings()
        dispatch = self._dispatch(options)
        if options["metrics_port"] is not None:
            _check_metrics_flags(options)
        _configure_logging(options["verbosity"])
        if options["processes"] > 1:
            if can_fork():
                # Children forked from here start working at once; they must not share this
                # process's database connections (the checks above opened one).
                connections.close_all()
                start_child = fork_worker(lambda: self._run_worker(options, settings, dispatch))
            else:
                start_child = spawn_command(child_command(sys.orig_argv))
            processes, burst = options["processes"], options["burst"]
            sys.exit(Supervisor(start_child, processes, restart_clean_exits=not burst).run())
        sys.exit(self._run_worker(options, settings, dispatch))

    def _run_worker(self, options: dict[str, Any], settings: BackWaveSettings, dispatch: Dispatch) -> int:
        """One worker process's whole life; returns its exit code."""
        from ...worker import Worker, WorkerOptions

        endpoint = _metrics_endpoint(options)
        worker = Worker(
            WorkerOptions(
                dispatch=dispatch,
                concurrency=options["concurrency"] or settings.concurrency,
                name=options["name"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                shutdown_timeout=options["shutdown_timeout"],
                give_up_after=options["give_up_after"],
                metrics=endpoint.metrics if endpoint is not None else None,
            ),
            settings,
        )
        worker.install_signal_handlers()
        if endpoint is not None:
            endpoint.start(worker)
        try:
            code = worker.run()
        finally:
            if endpoint is not None:
                endpoint.stop()
        sys.stdout.flush()
        sys.stderr.flush()
        if worker.running or worker.executor.abandoned_threads:
            # Handler threads still running after the shutdown timeout (their leases were
            # released), or stuck past their timeout: do not wait for them at interpreter exit.
            logging.shutdown()
            import os

            os._exit(code)
        return code


def _check_metrics_flags(options: dict[str, Any]) -> None:
    """Before any work starts: prometheus_client is installed and every process's port exists."""
    from ...metrics import MISSING_MESSAGE, prometheus_available

    if not prometheus_available():
        raise CommandError(f"--metrics-port: {MISSING_MESSAGE}")
    last = options["metrics_port"] + options["processes"] - 1
    if last > 65535:
        raise CommandError(
            f"--metrics-port {options['metrics_port']} with --processes {options['processes']} needs "
            f"ports up to {last}, past 65535; choose a lower port."
        )


def _metrics_endpoint(options: dict[str, Any]) -> Any:
    """This process's metrics endpoint (``WorkerEndpoint``), bound now; None without ``--metrics-port``."""
    if options["metrics_port"] is None:
        return None
    import os

    from ...metrics.server import WorkerEndpoint

    port = options["metrics_port"] + int(os.environ.get("BACKWAVE_WORKER_SLOT", "0"))
    try:
        return WorkerEndpoint(options["metrics_host"], port)
    except OSError as exc:
        raise CommandError(
            f"--metrics-port: cannot listen on {options['metrics_host']}:{port} ({exc.strerror or exc})."
        ) from None


def _configure_logging(verbosity: int) -> None:
    """Show the worker's log lines when the project configured no handler for them."""
    package_logger = logging.getLogger("backwave_django")
    if verbosity >= 2:
        package_logger.setLevel(logging.DEBUG)
    elif package_logger.level == logging.NOTSET:
        package_logger.setLevel(logging.INFO)
    if not package_logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        package_logger.addHandler(handler)
