"""
The successors of B-Pref (issue 44), each measured on the gap it was made for, with the frozen quality protocol
(``benchmarks/quality``): the same tasks, budgets, seeds and runner; the method's arm beside the plain method's on
the same seeds, with the protocol's own arms (PPO on the true reward, the defaults with an oracle, the random-teacher
floor) on those seeds.

    python -m benchmarks successors run [--study rime] [--workers 2]   # resumes where it stopped
    python -m benchmarks successors report [--study rime]              # the tables of README.md
    python -m benchmarks successors plot [--study qpa]                 # its learning curves, a PNG beside README.md

Nothing here was chosen on the seeds it reports: each method runs at its paper's settings (see
``docs/successors.md``), and the seeds are the protocol's reported ones.

The studies and their arms: ``studies.py``.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent / "quality"))
import protocol  # noqa: E402
from protocol import run_jobs, settings_hash, train_one  # noqa: E402

from benchmarks.machine import machine  # noqa: E402
from benchmarks.study import Option, probe, shared, write_json  # noqa: E402
from benchmarks.successors.studies import STUDIES  # noqa: E402


def arm_spec(study: str, task: str, arm: str) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
    """:return: the runner's spec of ``task`` (its label budget set) and the arm's options"""
    budget_index, extra = STUDIES[study]["arms"][arm]
    spec = {key: value for key, value in protocol.TASKS[task].items() if key not in ("seeds", "budgets")}
    spec["labels"] = protocol.TASKS[task]["budgets"][budget_index]
    return spec, extra


def arm_hash(study: str, task: str, arm: str) -> str:
    """:return: the protocol's settings hash, for an arm of this study"""
    spec, extra = arm_spec(study, task, arm)
    return protocol.settings_digest(task, spec, extra)


def result_path(study: str, task: str, arm: str, seed: int) -> Path:
    return RESULTS / study / task / arm / f"seed{seed}.json"


def run_job(study: str, task: str, arm: str, seed: int) -> str:
    """One run of the study's own arms, fingerprinted as the protocol's runs are. :return: the JSON's path"""
    spec, extra = arm_spec(study, task, arm)
    path = result_path(study, task, arm, seed)
    train_one(task, spec, arm, extra, seed, path)
    result = json.loads(path.read_text())
    result.update(settings_hash=arm_hash(study, task, arm), labels=spec["labels"], study=study)
    write_json(path, result)
    return str(path)


def jobs(study: str) -> list[tuple[str, str, str, int]]:
    """
    :return: the study's own runs not yet done, seed by seed. The protocol's arms on these seeds come from the
        protocol's own run (``benchmarks/quality/protocol.py run``, which does cartpole_balance first): running them
        here too would race it for the same files.
    """
    config = STUDIES[study]
    return [
        (study, task, arm, seed)
        for task in config["tasks"]
        for seed in config["seeds"]
        for arm in config["arms"]
        if not result_path(study, task, arm, seed).exists()
    ]


def load(study: str, task: str, arm: str) -> dict[int, dict[str, Any]]:
    """:return: the finished runs of one arm by seed, refusing one whose settings differ from the arm's now"""
    own = arm in STUDIES[study]["arms"]
    expected = arm_hash(study, task, arm) if own else settings_hash(task, arm)
    runs = {}
    for seed in STUDIES[study]["seeds"]:
        path = result_path(study, task, arm, seed) if own else protocol.result_path(task, arm, seed)
        if path.exists():
            result = json.loads(path.read_text())
            if result.get("settings_hash") != expected:
                raise SystemExit(f"{path}: run with other settings than the arm's now; rerun it or restore them")
            runs[seed] = result
    return runs


def report(study: str) -> None:
    """
    Print the study's table: final return per seed and its mean; the score normalised as the protocol normalises it,
    ``(R - random) / (PPO - random)`` on the same seeds, and against the oracle arm; the learned reward's agreement
    with the true one on fresh pairs at the end; seeds ending above their start; CPU per run.
    """
    import numpy as np

    config = STUDIES[study]
    arms = [*config["protocol_arms"], *config["arms"]]
    for task in config["tasks"]:
        runs = {arm: load(study, task, arm) for arm in arms}
        seeds = [seed for seed in config["seeds"] if all(seed in runs[arm] for arm in arms)]
        print(f"\n### {study}: {task}, seeds {', '.join(map(str, seeds))} (the seeds every arm has finished)\n")
        header = " | ".join(f"seed {seed}" for seed in seeds)
        print(f"| arm | {header} | mean | score vs PPO | vs oracle | reward agreement | above start | CPU s / run |")
        print("|---|" + "---|" * (len(seeds) + 6))
        if not seeds:
            continue
        random = protocol_random(task)
        # a development study has no PPO or oracle arm: its arms are compared with each other only
        ppo = np.mean([runs["ppo"][seed]["final"] for seed in seeds]) - random if "ppo" in runs else float("nan")
        oracle = float("nan")
        plain = next((arm for arm in ("defaults_high", "plain_high") if arm in runs), None)  # the oracle teacher's
        if plain is not None:
            oracle = np.mean([runs[plain][seed]["final"] for seed in seeds]) - random
        for arm in arms:
            finals = [runs[arm][seed]["final"] for seed in seeds]
            mean = float(np.mean(finals))
            cpu = f"{np.mean([runs[arm][seed]['cpu_seconds'] for seed in seeds]):.0f}"
            where = {machine(runs[arm][seed]) for seed in seeds}
            if where != {machine(runs[arms[0]][seed]) for seed in seeds}:  # seconds on another CPU: say which
                cpu += f" ({', '.join(sorted(where))})"
            agreement = [runs[arm][seed].get("oracle_agreement") for seed in seeds]
            agree = f"{np.mean(agreement):.3f}" if None not in agreement else "-"
            above = sum(runs[arm][seed]["final"] > runs[arm][seed]["start"] + 250 for seed in seeds)
            cells = " | ".join(f"{value:.1f}" for value in finals)
            print(
                f"| {arm} | {cells} | {mean:.1f} | {(mean - random) / ppo:.2f} | {(mean - random) / oracle:.2f} | "
                f"{agree} | {above} of {len(seeds)} | {cpu} |"
            )
        own = list(config["arms"])
        every = [seed for seed in config["seeds"] if all(seed in runs[arm] for arm in own)]
        if every != seeds:  # the study's arms on more seeds than the protocol's have reached
            print(f"\nThe study's arms alone, seeds {', '.join(map(str, every))}:\n")
            print("| arm | " + " | ".join(f"seed {seed}" for seed in every) + " | mean | reward agreement |")
            print("|---|" + "---|" * (len(every) + 2))
            for arm in own:
                finals = [runs[arm][seed]["final"] for seed in every]
                agreement = np.mean([runs[arm][seed]["oracle_agreement"] for seed in every])
                print(f"| {arm} | " + " | ".join(f"{v:.1f}" for v in finals) + f" | {np.mean(finals):.1f} | {agreement:.3f} |")
        missing = {arm: sorted(set(config["seeds"]) - set(runs[arm])) for arm in arms}
        print("\nnot finished: " + (", ".join(f"{arm} {seeds}" for arm, seeds in missing.items() if seeds) or "none"))


def plot(study: str) -> None:
    """
    The study's learning curves on each task: every arm's deterministic return at the start and at each 10% of the
    run, the mean over the seeds every arm has finished (thick) and each seed (thin). Written to
    ``results/<study>_<task>.png`` and, for the docs, ``docs/images/successors_<study>_<task>.png``.
    """
    import shutil

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    config = STUDIES[study]
    arms = [*config["protocol_arms"], *config["arms"]]
    images = HERE.parents[1] / "docs" / "images"
    for task in config["tasks"]:
        runs = {arm: load(study, task, arm) for arm in arms}
        seeds = [seed for seed in config["seeds"] if all(seed in runs[arm] for arm in arms)]
        figure, axis = plt.subplots(figsize=(7.5, 4.5))
        for index, arm in enumerate(arms):
            colour = plt.get_cmap("tab10")(index)
            curves = []
            for seed in seeds:
                run = runs[arm][seed]
                steps = [0, *(step for step, _ in run["curve"])]
                curves.append([run["start"], *(value for _, value in run["curve"])])
                axis.plot(steps, curves[-1], color=colour, alpha=0.2, linewidth=0.8)
            labels = runs[arm][seeds[0]].get("labels")
            name = f"{arm} ({labels} labels)" if labels else f"{arm} (true reward)"
            axis.plot(steps, np.mean(curves, axis=0), color=colour, linewidth=2.2, label=name)
        axis.set_xlabel("env steps")
        axis.set_ylabel("deterministic return (5 episodes)")
        axis.set_title(f"{study}: {task}, seeds {seeds[0]}-{seeds[-1]} (thin: each seed; thick: mean)")
        axis.legend(fontsize=8, loc="upper left")
        figure.tight_layout()
        path = RESULTS / f"{study}_{task}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        shutil.copyfile(path, images / f"successors_{study}_{task}.png")
        print(f"wrote {path}")


def protocol_random(task: str) -> float:
    """:return: a uniform random policy's return on ``task``, the protocol's zero"""
    from report import RANDOM  # benchmarks/quality/report.py, on the path since the top of this file

    return float(RANDOM[task])


#: which of :data:`STUDIES` a probe runs or reads
STUDY = Option("--study", "the successor and the gap it is measured on", choices=sorted(STUDIES), default="rime")


@probe("run", "the study's runs not yet done (resumes: a run whose JSON exists is skipped)", STUDY, shared("workers"))
def run_study(args: argparse.Namespace) -> None:
    """
    Every arm on every seed of the study, ``--workers`` at a time, each run's JSON written as it lands.

    :param args: the options
    """
    run_jobs(run_job, jobs(args.study), args.workers)


@probe("report", "the study's tables of README.md, from the committed run files", STUDY)
def report_study(args: argparse.Namespace) -> None:
    """
    The method's arm beside the plain method's and the protocol's own arms, on the same seeds.

    :param args: the options
    """
    report(args.study)


@probe("plot", "the study's learning curves, a PNG beside README.md (and one in docs/images)", STUDY)
def plot_study(args: argparse.Namespace) -> None:
    """
    Each seed's curve thin and their mean thick, per task and arm.

    :param args: the options
    """
    plot(args.study)
