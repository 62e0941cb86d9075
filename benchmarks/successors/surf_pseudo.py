"""
Why SURF does not lift the few-label runs (``README.md``, ``surf`` and ``surf_swingup``): how many of its
pseudo-labels are confident, and how many of those rank their pair as the true returns do.

    python -m benchmarks successors surf-pseudo [--seeds 100 101 102] [--workers 2]   # resumes where it stopped
    python -m benchmarks successors surf-pseudo-table

Two arms on the protocol's low budget (250 labels), its PPO settings and its reported seeds, at one commit and on
one machine: the defaults (``defaults_low``) and the same with ``surf=True`` at SURF's settings (``surf_low``, the
arm of those studies). After every query round a run keeps the learned reward's agreement with the true one on fresh
pairs, and SURF's ``reward/surf_confident`` (the share of unlabelled pairs a member is at least ``tau`` sure about)
and ``reward/surf_pseudo_agreement`` (the share of those confident pseudo-labels that a perfectly rational teacher
would give: the pool's true returns are read for this diagnostic only). Nothing is chosen here: it measures the
mechanism of results already reported.
"""

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

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


#: the two arms, run at one commit: the defaults at 250 labels, and the same with ``surf=True``
ARMS = {"defaults_low": False, "surf_low": True}


def result_path(task: str, arm: str, seed: int) -> Path:
    return RESULTS / task / arm / f"seed{seed}.json"


def train_recorded(
    task: str, budget: int, options: dict[str, Any], seed: int, wrap: Optional[Callable[[Any], None]] = None
) -> tuple[Any, dict[str, Any]]:
    """
    Train PPO_REWARD at its defaults plus ``options`` on ``task`` (the protocol's PPO settings, an oracle teacher),
    recording what each query round measured.

    :param task: a task of the protocol
    :param budget: 0 for the protocol's high label budget, 1 for its low one
    :param options: PPO_REWARD options beyond the defaults
    :param seed: the run's seed (evaluation env: ``seed + 1000``)
    :param wrap: called with the run's learner before training (a probe's change to this run's learner only)
    :return: the trained model, and the run's record (start, final return, rounds, CPU seconds, CPU)
    """
    import torch as th

    from sb3_pref import PPO_REWARD, RewardModel

    th.set_num_threads(1)
    spec = TASKS[task]
    env, eval_env = make_env(task, spec["n_envs"], seed), make_env(task, 1, seed + 1000)
    reward_model = RewardModel(env.observation_space, env.action_space)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=spec["budgets"][budget], seed=seed,
        verbose=0, **spec["ppo"], **options,
    )  # fmt: skip
    learner = model.pref_learner
    assert learner is not None
    rounds: list[dict[str, float]] = []
    query_round = learner.query_round

    def recorded_round(*args: Any, **kwargs: Any) -> dict[str, float]:
        # the learner's own round, and what it measured, with the step and the labels so far
        stats = query_round(*args, **kwargs)
        record: dict[str, float] = {"step": model.num_timesteps, "labels": learner.total_feed}
        record.update({key: float(stats[key]) for key in ROUND_KEYS if key in stats})
        if "true_pref_accuracy" in record:  # a round that trained (none once the budget is spent)
            rounds.append(record)
        return stats

    learner.query_round = recorded_round  # type: ignore[method-assign]  # this run's learner only
    if wrap is not None:
        wrap(learner)
    start = evaluate(model, eval_env, 5)
    cpu = time.process_time()
    model.learn(spec["steps"])
    cpu = time.process_time() - cpu
    assert model.pref_learner is learner and rounds, "the learner was rebuilt: its rounds were not recorded"
    record = dict(
        task=task, seed=seed, steps=spec["steps"], labels=int(learner.total_feed), start=start,
        final=evaluate(model, eval_env, 20), rounds=rounds, cpu_seconds=cpu, cpu_model=cpu_name(),
    )  # fmt: skip
    return model, record


def write_json(path: Path, result: dict[str, Any]) -> str:
    """:return: ``path``, with ``result`` written there (its folder made)"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return str(path)


def run_one(task: str, arm: str, seed: int) -> str:
    """Train ``arm`` (:data:`ARMS`) on ``task`` and ``seed``, recording each query round; :return: the JSON's path"""
    _, record = train_recorded(task, 1, {"surf": ARMS[arm]}, seed)
    return write_json(result_path(task, arm, seed), {"arm": arm, **record})


def table() -> str:
    """
    :return: per task, seed and arm, the final return, SURF's confident share and its pseudo-labels' agreement over
        the rounds, and the learned reward's agreement on fresh pairs; then each arm's means (Markdown)
    """
    lines = [
        "| task | seed | arm | start -> final | confident share (first round / mean) | pseudo-labels right "
        "(first / mean) | learned reward's agreement (first / last round) | CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    means: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for task in SURF_TASKS:
        for path in sorted((RESULTS / task).glob("*/seed*.json"), key=lambda p: (p.stem, p.parent.name)):
            run = json.loads(path.read_text())
            rounds = run["rounds"]

            def first_mean(key: str, rounds: list[dict[str, Any]] = rounds) -> str:
                values = [r[key] for r in rounds if key in r]
                return f"{values[0]:.3f} / {sum(values) / len(values):.3f}" if values else "-"

            agreement = [r["true_pref_accuracy"] for r in rounds]
            means.setdefault((task, run["arm"]), []).append((run["final"], agreement[-1]))
            lines.append(
                f"| {task} | {run['seed']} | {run['arm']} | {run['start']:.1f} -> {run['final']:.1f} "
                f"| {first_mean('surf_confident')} | {first_mean('surf_pseudo_agreement')} "
                f"| {agreement[0]:.3f} / {agreement[-1]:.3f} | {run['cpu_seconds']:.0f} |"
            )
    lines += ["", "| task | arm | runs | mean final return | mean agreement, last round |", "|---|---|---|---|---|"]
    for (task, arm), values in sorted(means.items()):
        finals, agreements = zip(*values)
        lines.append(
            f"| {task} | {arm} | {len(values)} | {sum(finals) / len(values):.1f} | {sum(agreements) / len(values):.3f} |"
        )
    return "\n".join(lines)


@probe(
    "surf-pseudo",
    "SURF's surf_low runs and the defaults beside them, recording per round how often SURF's pseudo-labels are right",
    shared("seeds", default=[100, 101, 102], help="seeds, one run per task and arm each (the protocol's reported ones)"),
    Option("--tasks", "the tasks", nargs="+", choices=list(SURF_TASKS), default=list(SURF_TASKS)),
    Option("--arms", "the arms", nargs="+", choices=list(ARMS), default=list(ARMS)),
    shared("workers"),
    environ={"MUJOCO_GL": "osmesa"},
)
def run_surf_pseudo(args: argparse.Namespace) -> None:
    """
    Each arm on each task and seed, ``--workers`` at a time; a run whose JSON exists is skipped.

    :param args: the options
    """
    jobs = [(task, arm, seed) for seed in args.seeds for arm in args.arms for task in args.tasks]
    run_jobs(run_one, [job for job in jobs if not result_path(*job).exists()], args.workers)


@probe("surf-pseudo-table", "the surf-pseudo runs' table, from their committed JSON files")
def print_table(args: argparse.Namespace) -> None:
    """
    Per run: its return, the confident share and the pseudo-labels' agreement over its rounds.

    :param args: the options (none)
    """
    print(table())
