"""
The frozen quality protocol (issue 42): what a user who swaps one line gets, against PPO on the true reward and a
floor, on seeds that were never used to choose anything.

    python -m benchmarks quality run [--seeds report|dev] [--workers 2]   # resumes where it stopped
    python -m benchmarks quality report [--seeds report|dev]              # the tables of README.md

``python benchmarks/quality/protocol.py run|report [options]`` still works: jobs run it so.

Frozen here, once the defaults (issue 41) had landed: the tasks, budgets, arms and seeds below. Every run records
the library's commit and a hash of its resolved settings; the report refuses to put runs of different settings in
one row. Reported seeds are 100-109 (cartpole_swingup: 100-104); seeds 0-4 are the development set, reported apart.

Arms: PPO on the true reward; PPO_REWARD at the library's defaults (only the oracle teacher and the label budget
set) at the task's high and low budget; the best hand-set schedule of ``benchmarks/quality_grid/README.md`` at the high
budget; and the floor: the defaults with a teacher that answers at random, at the high budget.

Each run: a deterministic evaluation of 5 episodes every 10% of the run, and 20 at the end (the envs of evaluation
are seeded ``seed + 1000``). Two runs at a time, one torch thread each, ordered so that each seed's PPO run and its
PPO_REWARD run at the high budget run side by side (the CPU ratio compares runs under the same load).
"""

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent / "defaults"))
from run import DMC_PPO, PENDULUM_PPO, run_jobs, train_one  # noqa: E402

from benchmarks.study import probe, run_script, shared  # noqa: E402  (run, just imported, puts the root on the path)

#: the schedules of benchmarks/quality_grid/quality.yaml (the hand-set grid of its README.md) at each task's high budget
_DMC_SHORT = dict(num_interaction=4000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50, feed_type="disagreement")
_DMC_LONG = dict(num_interaction=16000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50, feed_type="disagreement")

#: task -> steps, envs, PPO settings, reported seeds, (high, low) label budgets, the hand-set schedule at the high one
TASKS: dict[str, dict[str, Any]] = {
    "cartpole_balance": dict(
        steps=120_000, n_envs=8, ppo=DMC_PPO, seeds=range(100, 110), budgets=(1000, 250),
        handset=dict(_DMC_SHORT, model=dict(initial_mb_size=200, mb_size=100)),
    ),
    "Pendulum-v1": dict(
        steps=100_000, n_envs=4, ppo=PENDULUM_PPO, seeds=range(100, 110), budgets=(200, 50),
        handset=dict(num_interaction=4096, unsuper_step=8192, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=25)),
    ),
    "cartpole_swingup": dict(
        steps=400_000, n_envs=8, ppo=DMC_PPO, seeds=range(100, 105), budgets=(1000, 250),
        handset=dict(_DMC_LONG, model=dict(initial_mb_size=100, mb_size=50)),
    ),
}  # fmt: skip
DEV_SEEDS = range(0, 5)

#: arm -> (which budget, what PPO_REWARD gets beyond the user's PPO; None: PPO on the true reward)
ARMS: dict[str, tuple[int, Optional[dict[str, Any]]]] = {
    "ppo": (0, None),
    "defaults_high": (0, {}),
    "defaults_low": (1, {}),
    "handset_high": (0, {"handset": True}),
    "floor_high": (0, {"random_teacher": True}),
}
#: the order of a seed's runs: each pair runs side by side
ORDER = ("ppo", "defaults_high", "defaults_low", "floor_high", "handset_high")


def run_spec(task: str, arm: str) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
    """:return: the study runner's spec of ``task`` for ``arm`` (its label budget set) and the arm's options"""
    budget_index, extra = ARMS[arm]
    spec = {key: value for key, value in TASKS[task].items() if key not in ("seeds", "budgets")}
    spec["labels"] = TASKS[task]["budgets"][budget_index]
    return spec, extra


def settings_digest(task: str, spec: dict[str, Any], extra: Optional[dict[str, Any]]) -> str:
    """:return: a short hash of everything a run is given: the task, the runner's spec, the arm's options"""
    text = json.dumps({"task": task, "spec": spec, "arm": extra}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def settings_hash(task: str, arm: str) -> str:
    """:return: a short hash of everything a run of ``arm`` on ``task`` is given (not the seed, not the commit)"""
    return settings_digest(task, *run_spec(task, arm))


def result_path(task: str, arm: str, seed: int) -> Path:
    return RESULTS / task / arm / f"seed{seed}.json"


def run_job(task: str, arm: str, seed: int) -> str:
    """Train one run and add the protocol's fingerprint to its JSON. :return: the JSON's path"""
    spec, extra = run_spec(task, arm)
    path = result_path(task, arm, seed)
    train_one(task, spec, arm, extra, seed, path)
    result = json.loads(path.read_text())
    result["settings_hash"] = settings_hash(task, arm)
    result["labels"] = spec["labels"] if extra is not None else 0
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, path)  # a stop between the two writes leaves the study runner's file, which report refuses
    return str(path)


def jobs(seeds: str) -> list[tuple[str, str, int]]:
    """:return: the runs not yet done, task by task, seed by seed, arms in :data:`ORDER`"""
    todo = []
    for task, spec in TASKS.items():
        for seed in DEV_SEEDS if seeds == "dev" else spec["seeds"]:
            todo += [(task, arm, seed) for arm in ORDER if not result_path(task, arm, seed).exists()]
    return todo


@probe("report", "the tables of README.md, from the committed run files", shared("seed_group"))
def report_protocol(args: argparse.Namespace) -> None:
    """
    Each arm's scores over PPO's and the floor, per task and budget; runs of different settings never share a row.

    :param args: the options
    """
    # report.py imports this file as ``protocol``, from this folder: on the path when this file is run by path only
    sys.path.insert(0, str(HERE))
    from report import report

    report(args.seeds)


@probe(
    "run",
    "the protocol's runs not yet done (resumes: a run whose JSON exists is skipped)",
    shared("seed_group"),
    shared("workers"),
)
def run_protocol(args: argparse.Namespace) -> None:
    """
    Every arm on every task and seed, ``--workers`` at a time, each run's JSON written as it lands.

    :param args: the options
    """
    run_jobs(run_job, jobs(args.seeds), args.workers)


if __name__ == "__main__":
    # python benchmarks/quality/protocol.py run|report [options]: the command the jobs of this study were started with
    commands = {"run": run_protocol, "report": report_protocol}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit("usage: python benchmarks/quality/protocol.py {run,report} [--seeds report|dev] [--workers N]")
    run_script(commands[sys.argv[1]], sys.argv[2:])
