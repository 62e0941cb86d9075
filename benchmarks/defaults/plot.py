"""
The defaults study's learning curves (the deterministic evaluations every 10% of each run), one panel per task:

    python -m benchmarks defaults plot [--seeds report|dev]   # docs/images/defaults_<seeds>.png and curves_<seeds>.png
    python -m benchmarks defaults plot --task walker_stand    # one task, every arm with a label: curves_<task>_<seeds>.png
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from benchmarks.defaults.table import load
from benchmarks.study import Option, probe, shared
from sb3_pref.core.feedback_plan import FeedbackPlan

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
#: arm -> (legend label, colour)
STYLES = {
    "ppo": ("PPO on the true reward", "black"),
    "defaults": ("PPO_REWARD, defaults (teacher + label budget only)", "tab:blue"),
    "handset": ("PPO_REWARD, best hand-set schedule", "tab:orange"),
    "random_teacher": ("floor: defaults, teacher answering at random", "tab:red"),
    # the candidates of walker_stand's hand-set schedule, taken apart (README.md), shown with --task only
    "first_round_100": ("the plan with a first round of 100", "tab:green"),
    "first_round_100_six_tenths": ("... and every label by six tenths of the run", "tab:purple"),
}
#: the tasks of the default figure, and the arms it shows
OVERVIEW_TASKS = ("cartpole_balance", "Pendulum-v1", "Pendulum-v1-peer", "cartpole_swingup")
OVERVIEW_ARMS = ("ppo", "defaults", "handset", "random_teacher")


@probe(
    "plot",
    "the learning curves, one panel per task (docs/images/defaults_<seeds>.png)",
    shared("seed_group"),
    Option("--task", "one task, with every arm that has a label (default: the overview's four tasks, its four arms)"),
)
def plot(args: argparse.Namespace) -> None:
    """
    Every seed's deterministic evaluations as a thin line, their mean as a thick one, and where the defaults ask labels.

    :param args: the options
    """
    runs = load(args.seeds)
    if args.task is not None and args.task not in runs:
        raise SystemExit(f"--task {args.task}: no {args.seeds} runs of it in {sorted(runs)}")
    tasks = [args.task] if args.task else [task for task in OVERVIEW_TASKS if task in runs]
    arms = tuple(STYLES) if args.task else OVERVIEW_ARMS
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks) + (4.8 if args.task else 0), 4), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        for arm, by_seed in sorted(runs[task].items()):
            if arm not in arms:
                continue
            # the start (step 0) and the 10 evaluations, every seed a thin line, their mean a thick one
            curves = np.array([[(0, run["start"]), *run["curve"]] for run in by_seed.values()], dtype=float)
            steps = curves[0, :, 0] / 1000
            name, colour = STYLES[arm]
            for curve in curves:
                axis.plot(steps, curve[:, 1], color=colour, alpha=0.25, linewidth=0.8)
            axis.plot(steps, curves[:, :, 1].mean(0), color=colour, linewidth=2.2, label=f"{name} (n={len(curves)})")
        plan = next((run["plan"] for run in runs[task].get("defaults", {}).values()), None)
        if plan:
            # the rounds as the controller runs them (step, labels)
            steps = [step / 1000 for step, _ in FeedbackPlan.from_dict(plan).rounds()]
            axis.axvspan(steps[0], steps[-1], color="tab:blue", alpha=0.07, label="defaults: labels asked")
        axis.set_title(f"{task}, {args.seeds} seeds")
        axis.set_xlabel("env steps (thousands)")
        axis.set_ylabel("deterministic true return (5 episodes)")
        axis.grid(alpha=0.3)
        if args.task:  # seven arms: beside the panel, not over the curves' ends
            axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            axis.legend(fontsize=6, loc="lower right")
    figure.tight_layout()
    IMAGES.mkdir(parents=True, exist_ok=True)
    # one copy for the docs, one beside the study's README (the docs site builds the study folders on their own)
    name = f"{args.task}_{args.seeds}" if args.task else args.seeds
    for path in (IMAGES / f"defaults_{name}.png", Path(__file__).resolve().parent / f"curves_{name}.png"):
        figure.savefig(path, dpi=110)
        print(path)
