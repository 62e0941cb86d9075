"""
What a successor costs, on the machine at hand: its arm, the plain method's arm at the same label budget and PPO on
the true reward, one seed, all three at the same time, so their CPU seconds share the load and the CPU.

    python -m benchmarks successors cost --study surf_swingup --seed 100   # writes results/<study>/cost/
    python -m benchmarks successors cost-table                             # every study's cost rows

Why a probe of its own: a study's arms and the protocol's arms they are compared with can have run on different
machines (two cloud machines both named AMD EPYC, one with AVX2 only, one with AVX512-BF16, train the same run in
very different CPU seconds), so a cost ratio read across the study's table can compare two CPUs. These runs are
cost measurements only: their returns are one seed and stay out of the studies' tables.
"""

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.study import probe, shared
from benchmarks.successors import run as successors

COST = "cost"


#: the protocol's defaults arms, by budget index (0: high, 1: low)
PLAIN_ARMS = ("defaults_high", "defaults_low")


def plain_arm(budget_index: int) -> str:
    """:return: the protocol's defaults arm at a budget (0: high, 1: low), the plain method an arm is costed against"""
    return PLAIN_ARMS[budget_index]


def cost_arms(study: str) -> list[tuple[str, str, str]]:
    """:return: ``(task, arm, kind)`` for the study's arms, their plain arms and PPO; kind is "own" or "protocol" """
    config = successors.STUDIES[study]
    rows: list[tuple[str, str, str]] = []
    for task in config["tasks"]:
        plain = {plain_arm(budget) for budget, _ in config["arms"].values()}
        rows += [(task, "ppo", "protocol"), *((task, arm, "protocol") for arm in sorted(plain))]
        # a study with arms of its own for PPO or the defaults (the fresh-seed reports) runs those once
        rows += [(task, arm, "own") for arm in config["arms"] if arm not in ("ppo", *PLAIN_ARMS)]
    return rows


def cost_path(study: str, task: str, arm: str, seed: int) -> Path:
    return successors.RESULTS / study / COST / task / f"{arm}_seed{seed}.json"


def cost_run(study: str, task: str, arm: str, kind: str, seed: int) -> str:
    """One run of a cost set, written under ``results/<study>/cost/``. :return: the JSON's path"""
    spec, extra = successors.arm_spec(study, task, arm) if kind == "own" else successors.protocol.run_spec(task, arm)
    path = cost_path(study, task, arm, seed)
    successors.train_one(task, spec, arm, extra, seed, path)
    return str(path)


@probe(
    "cost",
    "the study's arms, their plain arms and PPO on one seed, side by side on this machine (their CPU seconds)",
    successors.STUDY,
    shared("seed", help="the seed of the set", default=100),
)
def cost(args: argparse.Namespace) -> None:
    """
    Run the set at once, one process per arm (skipping runs whose JSON exists).

    :param args: the options
    """
    todo = [(args.study, *row, args.seed) for row in cost_arms(args.study)]
    todo = [job for job in todo if not cost_path(job[0], job[1], job[2], job[4]).exists()]
    print(f"{len(todo)} runs to do", flush=True)
    with ProcessPoolExecutor(max(1, len(todo))) as pool:
        for path in pool.map(cost_run, *zip(*todo)) if todo else ():
            print("done", path, flush=True)


@probe("cost-table", "every study's cost set: CPU seconds per run, against the plain arm and PPO")
def cost_table(args: argparse.Namespace) -> None:
    """
    One row per arm of each cost set found under ``results/*/cost/``.

    :param args: the options (none)
    """
    print("| study | task | seed | machine | arm | CPU s | vs plain | vs PPO | final return (one seed) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for study in sorted(successors.STUDIES):
        for task_dir in sorted((successors.RESULTS / study / COST).glob("*")):
            runs: dict[tuple[int, str], dict] = {}
            for path in sorted(task_dir.glob("*_seed*.json")):
                run = json.loads(path.read_text())
                runs[(run["seed"], run["arm"])] = run
            for (seed, arm), run in sorted(runs.items()):
                ppo = runs.get((seed, "ppo"))
                own = successors.STUDIES[study]["arms"].get(arm)
                plain = runs.get((seed, plain_arm(own[0]))) if own else None
                print(
                    f"| {study} | {task_dir.name} | {seed} | {machine(run)} | {arm} | {run['cpu_seconds']:.0f} | "
                    f"{cpu_ratio(run, plain)} | {cpu_ratio(run, ppo)} | {run['final']:.1f} |"
                )


def cpu_ratio(run: dict, other: "dict | None") -> str:
    """:return: the run's CPU seconds over the other's ("-" without one)"""
    return f"{run['cpu_seconds'] / other['cpu_seconds']:.2f}" if other else "-"
