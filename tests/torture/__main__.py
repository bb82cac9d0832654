"""``python -m tests.torture``: run the torture suite; see docs/reliability.md."""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
from pathlib import Path
from types import FrameType

MODES = {
    # duration, workers, clients, drain bound
    "short": (30.0, 3, 2, 45.0),
    "long": (1800.0, 4, 4, 180.0),
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.torture", description=__doc__)
    parser.add_argument("--mode", choices=sorted(MODES), default="short")
    parser.add_argument("--seed", type=lambda s: int(s, 0), help="random if omitted (always printed)")
    parser.add_argument("--duration", type=float, help="workload seconds (short 30, long 1800)")
    parser.add_argument("--workers", type=int, help="worker processes (short 3, long 4)")
    parser.add_argument("--clients", type=int, help="client processes (short 2, long 4)")
    parser.add_argument("--drain-bound", type=float, help="seconds the drain may take (short 45, long 180)")
    parser.add_argument("--artifacts", type=Path, default=Path("torture-artifacts"))
    parser.add_argument("--sabotage", choices=["fence", "limits"], default="", help="break the product on purpose")
    parser.add_argument("--no-chaos", action="store_true", help="no kills, stops or backend terminations")
    parser.add_argument(
        "--restarts",
        choices=["auto", "private", "off"],
        default="auto",
        help="long mode restarts a private PostgreSQL cluster (auto: when one can be started)",
    )
    parser.add_argument("--restart-every", type=float, default=300.0, help="seconds between restarts")
    parser.add_argument("--private-port", type=int, default=5439)
    parser.add_argument("--database", default="", help="scratch database name (default bw_torture_<pid>)")
    parser.add_argument(
        "--duplicate-delivery",
        type=float,
        default=0.1,
        help="chance a worker sends an outcome batch twice, as after a lost acknowledgement (default 0.1)",
    )
    parser.add_argument(
        "--flow-share",
        type=float,
        default=0.3,
        help="share of enqueues (and of batches) that are limited or partitioned jobs (default 0.3)",
    )
    parser.add_argument(
        "--clock-skew",
        type=float,
        default=None,
        help="seconds the first worker's clock runs behind the others' (short 0, long 1.5)",
    )
    parser.add_argument(
        "--batch-window",
        type=float,
        default=0.0,
        help="the workers' BATCH_WINDOW in seconds (default 0: none; at most 1)",
    )
    parser.add_argument("--keep-artifacts", action="store_true", help="keep the artifact folder of a clean run")
    args = parser.parse_args(argv)
    for name in ("duration", "workers", "clients", "drain_bound"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    if not 0 <= args.duplicate_delivery <= 1:
        parser.error(f"--duplicate-delivery must be between 0 and 1, got {args.duplicate_delivery}")
    if args.clock_skew is not None and not 0 <= args.clock_skew < 3:
        parser.error(f"--clock-skew must be at least 0 and below the 3 s lease, got {args.clock_skew}")
    if not 0 <= args.batch_window <= 1:
        parser.error(f"--batch-window must be between 0 and 1 second, got {args.batch_window}")
    if not 0 <= args.flow_share <= 1:
        parser.error(f"--flow-share must be between 0 and 1, got {args.flow_share}")
    if args.database and not args.database.startswith("bw_torture"):
        parser.error("--database must start with 'bw_torture' (it is dropped and recreated)")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s torture: %(message)s")
    from .runner import RunConfig, Runner, summary

    duration, workers, clients, drain = MODES[args.mode]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    config = RunConfig(
        mode=args.mode,
        seed=seed,
        duration=args.duration or duration,
        workers=args.workers or workers,
        clients=args.clients or clients,
        artifacts=args.artifacts,
        sabotage=args.sabotage,
        drain_bound=args.drain_bound or drain,
        chaos=not args.no_chaos,
        restarts=args.restarts,
        restart_every=args.restart_every,
        private_port=args.private_port,
        database=args.database,
        keep_artifacts=args.keep_artifacts,
        duplicate_delivery=args.duplicate_delivery,
        flow_share=args.flow_share,
        clock_skew=(1.5 if args.mode == "long" else 0.0) if args.clock_skew is None else args.clock_skew,
        batch_window=args.batch_window,
    )
    logging.getLogger("torture").info("seed %d (replay with --seed %d)", seed, seed)
    runner = Runner(config)
    # SIGTERM (and SIGINT, which background jobs inherit as ignored) stop the run cleanly: workers,
    # clients and any private PostgreSQL cluster are stopped and the scratch database dropped.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    code = runner.run()
    print(summary(runner, code), flush=True)
    return code


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
