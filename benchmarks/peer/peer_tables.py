"""
The tables of the race with imitation (``peer_imitation.py`` runs it): every run, the medians, the rank tests and the
paired CPU ratios, from the committed results; numpy and scipy only, so it reads what either interpreter wrote.

    python -m benchmarks peer table --study peer_100k   # -> benchmarks/peer/peer_100k.md
"""

import argparse
import glob
import json
import os
import statistics

import numpy as np

from benchmarks import machine
from benchmarks.peer.peer_imitation import HERE, LIBRARIES, STUDIES, STUDY, evaluate
from benchmarks.study import probe


@probe("table", "the Markdown table of a study's results (peer_100k: written beside this file)", STUDY)
def print_table(args: argparse.Namespace) -> None:
    """
    The table of the study's results, seed by seed, with the notes that say what it can and cannot show.

    :param args: the options
    """
    if args.study == "peer":
        table()
    else:
        table_100k(args.study)


NOTES = """\
**CartPole-v1 is no test of learning from preferences.** Its reward is +1 on every step, the last one included,
and both libraries cut segments of a fixed length from inside one episode (imitation's fragments, sb3_pref's
segments): every segment's true return equals its length, so an oracle's labels carry no information about the
task. What each policy learns there follows the sign of an offset that comparisons cannot identify: a learned
reward that is negative on average teaches the agent to drop the pole at once (returns near 9), a positive one
to keep it up (500). The CartPole rows measure that coin and the CPU cost, nothing more. Learning from
preferences on a task that ends early needs segments that run past the end (an absorbing state of zero reward),
which neither library does; Pendulum-v1, which never ends early, is the informative task. At the tutorial's
20k steps no method has learned to swing the pendulum up (PPO on the true reward included, about -1100; a
converged policy scores about -200): the rows compare early progress and cost."""


def table() -> None:
    records = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(HERE, "results", "peer", "*.json")))]
    cpu_name = machine.cpu_name()
    lines = [
        "# PPO_REWARD against imitation 1.0.1 (preference comparisons), side by side",
        "",
        f"CPU: {cpu_name}, 2 cores **shared with other jobs** (load average at each run's start is listed): CPU "
        "seconds are the figure to compare. One torch thread per run; runs one after another. See "
        "`benchmarks/peer/peer_imitation.py` for the settings.",
        "",
        "| env | library | seed | steps | comparisons | CPU (s) | wall (s) | load | true return (10 episodes) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r["env"], r["library"], r["seed"])):
        lines.append(
            f"| {r['env']} | {r['library']} (SB3 {r['sb3']}) | {r['seed']} | {r['steps']} | "
            f"{'- (true reward)' if r['library'] == 'ppo' else r['comparisons']} | "
            f"{r['cpu']:.1f} | {r['wall']:.1f} | {r['load_before']:.1f} | {r['return']:.1f} |"
        )
    lines += ["", "Medians over seeds (CPU ratio = PPO_REWARD / imitation; `ppo` is SB3's PPO on the true reward):", ""]
    for env in sorted({r["env"] for r in records}):
        by = {lib: [r for r in records if r["env"] == env and r["library"] == lib] for lib in ("sb3_pref", "imitation")}
        if not all(by.values()):
            continue
        med = {
            lib: (statistics.median(r["cpu"] for r in rs), statistics.median(r["return"] for r in rs))
            for lib, rs in by.items()
        }
        lines.append(
            f"- {env}: sb3_pref CPU {med['sb3_pref'][0]:.1f} s, return {med['sb3_pref'][1]:.1f} "
            f"({len(by['sb3_pref'])} seeds); "
            f"imitation CPU {med['imitation'][0]:.1f} s, return {med['imitation'][1]:.1f} ({len(by['imitation'])} seeds); "
            f"CPU ratio {med['sb3_pref'][0] / med['imitation'][0]:.2f}"
        )
        ppo = [r for r in records if r["env"] == env and r["library"] == "ppo"]
        if ppo:
            ppo_cpu = statistics.median(r["cpu"] for r in ppo)
            lines[-1] += (
                f"; ppo CPU {ppo_cpu:.1f} s, return {statistics.median(r['return'] for r in ppo):.1f} "
                f"({len(ppo)} seeds): PPO alone is {ppo_cpu / med['imitation'][0]:.2f} of imitation's CPU"
            )
    missing = [
        f"{lib} {env} seed {seed}"
        for env in sorted({r["env"] for r in records})
        for lib in ("imitation", "sb3_pref", "ppo")
        for seed in sorted({r["seed"] for r in records})
        if not any(r["env"] == env and r["library"] == lib and r["seed"] == seed for r in records)
    ]
    if missing:
        lines += [
            "",
            f"Runs with no result: {', '.join(missing)}. imitation's CartPole runs stop with its fragmenter's "
            "`ValueError: No trajectories are long enough for the desired fragment length of 25` when a seed's "
            "policy drops the pole within 25 steps in every episode of an iteration; the medians are over the "
            "seeds that finished.",
        ]
    lines += ["", NOTES]
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(HERE, "peer_imitation.md"), "w") as file:
        file.write(report)


def table_100k(study: str) -> None:
    """The ``peer_100k`` tables: every run, then medians, rank tests and paired CPU ratios, into ``<study>.md``."""
    from scipy.stats import mannwhitneyu

    records = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(HERE, "results", study, "*.json")))]
    cpu_name = machine.cpu_name()
    names = {"imitation": "imitation 1.0.1", "sb3_pref": "PPO_REWARD, defaults", "ppo": "PPO, true reward",
             "sb3_pref_floor": "floor: defaults, random teacher"}  # fmt: skip
    lines = [
        f"# PPO_REWARD against imitation 1.0.1 on Pendulum-v1 at {STUDIES[study]['steps']:,} steps ({study})",
        "",
        f"CPU: {cpu_name}, 2 cores, one torch thread per run; imitation and PPO_REWARD of a seed run side by side, "
        "then PPO and the floor. `python -m benchmarks peer table --study peer_100k` writes this "
        "page from `results/peer_100k/`.",
        "",
        "| library | seed | env steps used | CPU (s) | in-loop agent | CPU, retraining (s) | fresh PPO, learned reward |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (LIBRARIES.index(r["library"]), r["seed"])):
        retrained = f"{r['retrained_return']:.1f}" if "retrained_return" in r else "-"
        retrain_cpu = f"{r['cpu_retrain']:.1f}" if "cpu_retrain" in r else "-"
        lines.append(
            f"| {names[r['library']]} | {r['seed']} | {r['steps_used']:,} | {r['cpu']:.1f} | {r['return']:.1f} | "
            f"{retrain_cpu} | {retrained} |"
        )
    by = {lib: [r for r in records if r["library"] == lib] for lib in LIBRARIES}

    def quartiles(values: list[float]) -> str:
        q1, q2, q3 = np.percentile(values, [25, 50, 75])
        return f"{q2:.1f} ({q1:.1f} to {q3:.1f})"

    random_return = evaluate(None, "Pendulum-v1", 100)
    lines += [
        "",
        "Medians over seeds (interquartile range in brackets); a random policy scores "
        f"{random_return:.1f} on the same evaluation episodes:",
        "",
        "| library | seeds | CPU (s) | in-loop agent | fresh PPO on the learned reward |",
        "|---|---|---|---|---|",
    ]
    for lib, rs in by.items():
        if not rs:
            continue
        retrained = [r["retrained_return"] for r in rs if "retrained_return" in r]
        lines.append(
            f"| {names[lib]} | {len(rs)} | {statistics.median(r['cpu'] for r in rs):.1f} | "
            f"{quartiles([r['return'] for r in rs])} | {quartiles(retrained) if retrained else '-'} |"
        )
    lines.append("")
    for a, b in (("sb3_pref", "imitation"), ("sb3_pref", "sb3_pref_floor"), ("imitation", "sb3_pref_floor")):
        for key, what in (("return", "in-loop"), ("retrained_return", "retrained")):
            x = [r[key] for r in by[a] if key in r]
            y = [r[key] for r in by[b] if key in r]
            if len(x) >= 3 and len(y) >= 3:
                p = mannwhitneyu(x, y, alternative="two-sided").pvalue
                lines.append(f"- {names[a]} against {names[b]}, {what}: Mann-Whitney two-sided p = {p:.2g} "
                             f"({len(x)} and {len(y)} seeds)")  # fmt: skip
    paired = {r["seed"]: r["cpu"] for r in by["imitation"]}
    ratios = [r["cpu"] / paired[r["seed"]] for r in by["sb3_pref"] if r["seed"] in paired]
    if ratios:
        lines.append(
            f"- CPU, PPO_REWARD / imitation, per seed (run side by side): median {statistics.median(ratios):.2f} "
            f"(range {min(ratios):.2f} to {max(ratios):.2f}, {len(ratios)} seeds), the training only"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(HERE, f"{study}.md"), "w") as file:
        file.write(report)
