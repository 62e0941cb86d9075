"""
Command line of the grid runner::

    python -m sb3_pref.experiments run benchmarks/grid_smoke.yaml               # local processes, all cores
    python -m sb3_pref.experiments run CONFIG.yaml --backend ray --address auto  # an existing Ray cluster
    python -m sb3_pref.experiments run CONFIG.yaml --dry-run                     # list the runs, run nothing
    python -m sb3_pref.experiments status runs/grid_smoke
    python -m sb3_pref.experiments report runs/grid_smoke                        # -> runs/grid_smoke/report/
"""

import argparse
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Optional


def _run(args: argparse.Namespace) -> int:
    from sb3_pref.experiments.config import load_config
    from sb3_pref.experiments.runner import run_grid

    config = load_config(args.config, output_dir=args.output_dir)
    if args.dry_run:
        return _dry_run(config, args.only)
    # A closed terminal or a `kill` stops the grid like Ctrl-C: the runs in flight are stopped and recorded.
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _interrupt)
    result = run_grid(
        config, backend=args.backend, workers=args.workers, address=args.address, only=args.only, interval=args.interval
    )
    for run_id, message in result.failed.items():
        print(f"failed: {run_id}: {message}", file=sys.stderr)
    if result.interrupted:
        return 130
    return 0 if result.ok else 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _dry_run(config, only: Optional[str]) -> int:
    import fnmatch

    from sb3_pref.experiments.records import RunRecord

    runs = [spec for spec in config.runs() if not only or fnmatch.fnmatch(spec.run_id, only)]
    for spec in runs:
        record = RunRecord(os.path.join(config.output_dir, spec.run_id))
        state = record.status if record.exists else "new"
        if record.exists and record.data.get("fingerprint") != spec.fingerprint():
            state = "CONFLICT"
        print(f"{spec.run_id:70s} {spec.total_timesteps:>10d} steps  {state}")
    print(f"{len(runs)} runs, {sum(s.total_timesteps for s in runs)} env steps in all, into {config.output_dir}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from sb3_pref.experiments.records import RunRecord, read_heartbeat
    from sb3_pref.experiments.results import load_runs

    runs = load_runs(args.run_dir, include_unfinished=True)
    for run in runs:
        steps = read_heartbeat(run.run_dir)
        progress = f"{steps:>10d}/{run.spec.total_timesteps} steps"
        wall_time = run.wall_time
        if run.status == "running":  # ended attempts plus the one in flight
            attempts = RunRecord(run.run_dir).data.get("attempts") or [{}]
            wall_time += time.time() - float(attempts[-1].get("started_at", time.time()))
        print(f"{run.spec.run_id:70s} {run.status:12s} {progress}  {wall_time / 60:7.1f} min")
    counts = Counter(run.status for run in runs)
    print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or f"no runs under {args.run_dir}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from sb3_pref.experiments.report import write_report

    path = write_report(args.run_dir, args.out, args.include_unfinished, args.metaworld_metric, args.seed, args.score)
    print(f"wrote {path}")
    return 0


def _worker(args: argparse.Namespace) -> int:
    from sb3_pref.experiments.training import execute_run

    # The local backend stops a run with SIGTERM: the run records itself as interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        execute_run(args.run_dir, backend="local")
    except KeyboardInterrupt:
        return 130
    except Exception:
        import traceback

        traceback.print_exc()
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sb3_pref.experiments", description="Run grids of sb3_pref experiments and report on them."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run (or resume) every unfinished run of a grid config")
    run.add_argument("config", help="the grid's YAML config")
    run.add_argument("--backend", choices=["local", "ray"], default="local", help="local processes, or Ray tasks")
    run.add_argument("--address", default=None, help="an existing Ray cluster ('auto', 'ray://host:10001'); ray only")
    run.add_argument(
        "--workers", type=int, default=None, help="runs at a time (default: the usable cores / the cluster's CPUs)"
    )
    run.add_argument("--output-dir", default=None, help="overrides the config's output_dir")
    run.add_argument("--only", default=None, help="a glob on run ids, e.g. 'prefppo/walker_walk/*'")
    run.add_argument("--interval", type=float, default=60.0, help="seconds between progress lines when not on a terminal")
    run.add_argument("--dry-run", action="store_true", help="list the runs and their state, run nothing")
    run.set_defaults(handler=_run)

    status = commands.add_parser("status", help="the state of every run in a grid folder")
    status.add_argument("run_dir")
    status.set_defaults(handler=_status)

    report = commands.add_parser("report", help="figures, tables and a Markdown summary of a grid folder")
    report.add_argument("run_dir")
    report.add_argument("--out", default=None, help="output folder (default: RUN_DIR/report)")
    report.add_argument("--include-unfinished", action="store_true", help="also use runs that have not finished")
    report.add_argument("--metaworld-metric", choices=["success", "return"], default="success", help="Meta-World score")
    report.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")
    report.add_argument(
        "--score",
        choices=["training", "eval"],
        default="training",
        help="a run's final score: its last logged training returns, or its closing deterministic evaluation",
    )
    report.set_defaults(handler=_report)

    worker = commands.add_parser("worker", help=argparse.SUPPRESS)
    worker.add_argument("run_dir")
    worker.set_defaults(handler=_worker)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """:param argv: the arguments (default: ``sys.argv[1:]``); :return: the exit status"""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    # ConfigError is a ValueError; RuntimeError: the folder is in use; ImportError: Ray or PyYAML missing.
    except (ValueError, FileNotFoundError, RuntimeError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
