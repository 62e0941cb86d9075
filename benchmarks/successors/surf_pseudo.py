"""
Why SURF does not lift the few-label runs (``README.md``, ``surf`` and ``surf_swingup``): how many of its
pseudo-labels are confident, and how many of those rank their pair as the true returns do.

    python -m benchmarks successors surf-pseudo [--seeds 100 101 102] [--workers 2]   # resumes where it stopped
    python -m benchmarks successors surf-pseudo-table

Each run is the ``surf_low`` arm of those studies (the protocol's low budget, 250 labels, ``surf=True`` at SURF's
settings, the defaults otherwise, the protocol's PPO settings and seeds). After every query round it keeps
``reward/surf_confident`` (the share of unlabelled pairs whose member is at least ``tau`` sure),
``reward/surf_pseudo_agreement`` (the share of those confident pseudo-labels that a perfectly rational teacher would
give: the pool's true returns are read for this diagnostic only) and the learned reward's agreement with the true one
on fresh pairs. Nothing is chosen here: it measures the mechanism of runs already reported.
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "surf_pseudo"
sys.path.insert(0, str(HERE.parent / "quality"))
from protocol import TASKS, run_jobs  # noqa: E402
from run import evaluate, make_env  # noqa: E402  (benchmarks/defaults/run.py, which protocol puts on the path)

from benchmarks.machine import cpu_name  # noqa: E402
from benchmarks.study import Option, probe, shared  # noqa: E402

#: the two tasks of SURF's bar, at the protocol's low budget
SURF_TASKS = ("cartpole_balance", "cartpole_swingup")
#: what a round's record keeps, by the names the learner's round statistics use
ROUND_KEYS = ("surf_confident", "surf_pseudo_agreement", "true_pref_accuracy")


def result_path(task: str, seed: int) -> Path:
    return RESULTS / task / f"seed{seed}.json"


def run_one(task: str, arm: str, seed: int) -> str:
    """Train the ``surf_low`` run of ``task`` and ``seed``, recording each query round; :return: the JSON's path"""
    import torch as th

    from sb3_pref import PPO_REWARD, RewardModel

    th.set_num_threads(1)
    spec = TASKS[task]
    env, eval_env = make_env(task, spec["n_envs"], seed), make_env(task, 1, seed + 1000)
    reward_model = RewardModel(env.observation_space, env.action_space)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=spec["budgets"][1], surf=True,
        seed=seed, verbose=0, **spec["ppo"],
    )  # fmt: skip
    learner = model.pref_learner
    rounds: list[dict[str, Any]] = []
    query_round = learner.query_round

    def recorded_round(*args: Any, **kwargs: Any) -> dict[str, float]:
        # the learner's own round, and what it measured, with the step and the labels so far
        stats = query_round(*args, **kwargs)
        record = {"step": int(model.num_timesteps), "labels": int(learner.total_feed)}
        record.update({key: float(stats[key]) for key in ROUND_KEYS if key in stats})
        if "surf_confident" in record:  # a round that trained (none once the budget is spent)
            rounds.append(record)
        return stats

    learner.query_round = recorded_round  # type: ignore[method-assign]
    start = evaluate(model, eval_env, 5)
    cpu = time.process_time()
    model.learn(spec["steps"])
    cpu = time.process_time() - cpu
    assert model.pref_learner is learner and rounds, "the learner was rebuilt: its rounds were not recorded"
    result = dict(
        task=task, arm=arm, seed=seed, steps=spec["steps"], labels=int(learner.total_feed), start=start,
        final=evaluate(model, eval_env, 20), rounds=rounds, cpu_seconds=cpu, cpu_model=cpu_name(),
    )  # fmt: skip
    path = result_path(task, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return str(path)


def table() -> str:
    """:return: per run, the confident share and the pseudo-labels' agreement over its rounds (Markdown)"""
    lines = [
        "| task | seed | start -> final | rounds | confident share (first round / mean) | pseudo-labels right (first / mean) "
        "| learned reward's agreement (first / last) | CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task in SURF_TASKS:
        for path in sorted((RESULTS / task).glob("seed*.json")):
            run = json.loads(path.read_text())
            rounds = run["rounds"]

            def first_mean(key: str, rounds: list[dict[str, Any]] = rounds) -> str:
                values = [r[key] for r in rounds if key in r]
                return f"{values[0]:.3f} / {sum(values) / len(values):.3f}" if values else "-"

            agreement = [r["true_pref_accuracy"] for r in rounds]
            lines.append(
                f"| {task} | {run['seed']} | {run['start']:.1f} -> {run['final']:.1f} | {len(rounds)} "
                f"| {first_mean('surf_confident')} | {first_mean('surf_pseudo_agreement')} "
                f"| {agreement[0]:.3f} / {agreement[-1]:.3f} | {run['cpu_seconds']:.0f} |"
            )
    return "\n".join(lines)


@probe(
    "surf-pseudo",
    "SURF's surf_low runs, recording per round the confident share and how often its pseudo-labels are right",
    shared("seeds", default=[100, 101, 102], help="seeds, one run per task each (the protocol's reported ones)"),
    Option("--tasks", "the tasks", nargs="+", choices=list(SURF_TASKS), default=list(SURF_TASKS)),
    shared("workers"),
    environ={"MUJOCO_GL": "osmesa"},
)
def run_surf_pseudo(args: argparse.Namespace) -> None:
    """
    Each task on each seed, ``--workers`` at a time; a run whose JSON exists is skipped.

    :param args: the options
    """
    jobs = [(task, "surf_low", seed) for seed in args.seeds for task in args.tasks]
    run_jobs(run_one, [job for job in jobs if not result_path(job[0], job[2]).exists()], args.workers)


@probe("surf-pseudo-table", "the surf-pseudo runs' table, from their committed JSON files")
def print_table(args: argparse.Namespace) -> None:
    """
    Per run: its return, the confident share and the pseudo-labels' agreement over its rounds.

    :param args: the options (none)
    """
    print(table())
