"""
The frozen protocol's tables (README.md), read from the committed run files: ``python -m benchmarks quality
report``.

Scores are normalised per task as ``(R - random) / (PPO - random)``, with a uniform random policy's return (measured
once, ``benchmarks/quality_grid/results/quality/random_returns.json``) and the mean of PPO's runs on the same seeds. The final
score is the closing 20-episode deterministic evaluation; the AUC is the mean of the 10 evaluations during the run,
normalised the same way by PPO's mean AUC. Per arm: the IQM of the normalised scores with a bootstrap interval over seeds, the
probability that a seed of the arm beats a seed of PPO (ties count half), the seed-paired difference of final
returns, and CPU seconds over PPO's on the same seeds.
"""

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from protocol import ORDER, RESULTS, TASKS, settings_hash

from sb3_pref.experiments.stats import bootstrap_ci, iqm

RANDOM_FILE = Path(__file__).resolve().parents[1] / "quality_grid" / "results" / "quality" / "random_returns.json"
RANDOM = json.loads(RANDOM_FILE.read_text())


def load(seeds: str) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """:return: task -> arm -> seed -> run, for the report seeds (100+) or the development seeds (0-4)"""
    runs: dict = defaultdict(lambda: defaultdict(dict))
    for path in sorted(RESULTS.glob("*/*/seed*.json")):
        run = json.loads(path.read_text())
        if (run["seed"] >= 100) == (seeds == "report"):
            runs[run["task"]][run["arm"]][run["seed"]] = run
    return runs


def check_one_setting(task: str, arm: str, by_seed: dict[int, dict[str, Any]]) -> None:
    """Refuse a row whose runs were given different settings (or settings the protocol no longer gives)."""
    hashes = {run.get("settings_hash") for run in by_seed.values()}
    if hashes != {settings_hash(task, arm)}:
        raise ValueError(
            f"{task} / {arm}: runs of settings {sorted(map(str, hashes))} where the protocol gives "
            f"{settings_hash(task, arm)}: move the old runs aside or rerun them"
        )


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """:return: P(a run of x beats a run of y), ties counting half (the Mann-Whitney statistic over |x||y|)"""
    greater = (x[:, None] > y[None, :]).mean()
    ties = (x[:, None] == y[None, :]).mean()
    return float(greater + 0.5 * ties)


def report(seeds: str) -> None:
    runs = load(seeds)
    for task in TASKS:
        arms = runs.get(task, {})
        ppo = arms.get("ppo", {})
        if not ppo:
            continue
        low = RANDOM[task]
        ppo_final = np.mean([run["final"] for run in ppo.values()])
        scale = ppo_final - low
        # the area under PPO's own evaluation curve is the AUC's unit (its final return would make PPO's AUC < 1)
        ppo_auc = np.mean([np.mean([v for _, v in run["curve"]]) for run in ppo.values()])
        print(f"\n### {task}, {TASKS[task]['steps'] // 1000}k steps ({seeds} seeds)\n")
        print(
            "| arm | labels | n | final return (mean) | final / PPO: IQM [95% CI] | AUC / PPO: IQM [95% CI] | "
            "P(better than PPO) | paired difference to PPO [95% CI] | above its start | CPU / PPO |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for arm in ORDER:
            by_seed = arms.get(arm, {})
            if not by_seed:
                continue
            check_one_setting(task, arm, by_seed)
            seeds_here = sorted(by_seed)
            final = np.array([by_seed[s]["final"] for s in seeds_here])
            score = (final - low) / scale
            auc = np.array([np.mean([v for _, v in by_seed[s]["curve"]]) for s in seeds_here])
            auc_score = (auc - low) / (ppo_auc - low)
            shared = [s for s in seeds_here if s in ppo]
            paired = np.array([by_seed[s]["final"] - ppo[s]["final"] for s in shared])
            ppo_scores = (np.array([ppo[s]["final"] for s in sorted(ppo)]) - low) / scale
            cpu = np.mean([by_seed[s]["cpu_seconds"] / ppo[s]["cpu_seconds"] for s in shared]) if shared else float("nan")
            above = sum(by_seed[s]["final"] > by_seed[s]["start"] for s in seeds_here)

            def cell(values: np.ndarray) -> str:
                lo, hi = bootstrap_ci(values, statistic=iqm, seed=0)
                return f"{iqm(values):.2f} [{lo:.2f}, {hi:.2f}]"

            lo, hi = bootstrap_ci(paired, seed=0) if len(paired) else (float("nan"), float("nan"))
            print(
                f"| {arm} | {by_seed[seeds_here[0]].get('labels', 0)} | {len(seeds_here)} | {final.mean():.1f} | "
                f"{cell(score)} | {cell(auc_score)} | {probability_of_improvement(score, ppo_scores):.2f} | "
                f"{paired.mean():+.1f} [{lo:+.1f}, {hi:+.1f}] | {above} of {len(seeds_here)} | {cpu:.2f} |"
            )
        floor, oracle = arms.get("floor_high", {}), arms.get("defaults_high", {})
        if floor and oracle:
            gap = np.mean([run["final"] for run in oracle.values()]) - np.mean([run["final"] for run in floor.values()])
            verdict = "informative" if gap > 0.5 * scale else "NOT informative: labels barely matter at this budget"
            print(f"\nFloor: the defaults with a random teacher end {gap:.1f} below the oracle's ({gap / scale:.2f} of "
                  f"PPO's lift over random): the task is {verdict}.")  # fmt: skip
