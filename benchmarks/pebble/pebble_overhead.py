"""
CPU cost of PEBBLE over a whole run: ``SAC_REWARD`` (oracle teacher, the library's defaults) against SB3's
``SAC`` on the true reward, same env, steps, seed and SAC settings, in one process. The two alternate (the
order flips every repeat, so drifting machine load hits both alike); CPU time is the process's
(``time.process_time``), with one torch thread.

Defaults are what a user gets: ``SAC_REWARD("MlpPolicy", env, reward_model=RewardModel(...), teacher="oracle")``
with every other argument at its default (9000 steps of state-entropy pretraining after SB3's 100 seed steps,
a round every 5000 steps, ``max_feed`` 1400 in rounds of 128, uniform queries) and SB3's SAC defaults
(2x256 networks, batch 256, one gradient step per env step). ``--bpref`` sets B-Pref's reward model
(3 x 256 units) instead of the library's (2 x 64).

The preference side is split by wrapping library methods from the outside (no library edit): the k-NN
state-entropy reward of pretraining, query rounds (selection, teacher, reward-model training), relabelling
the replay buffer, and the recorder (per-step copies, predictions for new transitions and, in pretraining, adding
states to the k-NN set with its neighbour lists). SAC's own work
(env, policy, gradient steps) is the rest.

    python -m benchmarks pebble overhead                                  # Pendulum-v1, 30k steps, 2 repeats
    python -m benchmarks pebble overhead --env walker_stand --total-timesteps 50000 --repeats 1
"""

import argparse
import datetime
import functools
import platform
import statistics
import time
from collections import defaultdict
from typing import Any, Callable

import stable_baselines3
import torch as th
from stable_baselines3 import SAC

import sb3_pref
from benchmarks.machine import cpu_name
from benchmarks.study import Option, probe, shared
from sb3_pref import SAC_REWARD, RewardModel
from sb3_pref.common.offpolicy import ReplayRewardWriter
from sb3_pref.common.rollout import RolloutRecorder
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.envs import make_benchmark_vec_env

PHASES = {
    "entropy (search)": (StateEntropyReward, "score"),
    "entropy (lookup)": (StateEntropyReward, "score_rows"),
    "query rounds": (PreferenceLearner, "query_round"),
    "relabel": (ReplayRewardWriter, "relabel"),
    "recorder": (RolloutRecorder, "_on_step"),
    "recorder end": (RolloutRecorder, "_on_rollout_end"),
}


class PhaseTimer:
    """CPU seconds spent inside wrapped methods, outermost call only (a phase called from another is not counted twice)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._depth = 0
        self._originals: list[tuple[type, str, Callable]] = []

    def wrap(self) -> None:
        for phase, (owner, name) in PHASES.items():
            original = getattr(owner, name)
            self._originals.append((owner, name, original))
            setattr(owner, name, self._timed(phase, original))

    def unwrap(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)
        self._originals.clear()

    def _timed(self, phase: str, function: Callable) -> Callable:
        timer = self

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if timer._depth:
                return function(*args, **kwargs)
            timer._depth += 1
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                timer.seconds[phase] += time.process_time() - start
                timer._depth -= 1

        return timed


def run_once(method: str, args: argparse.Namespace) -> dict[str, Any]:
    """One training run; returns its CPU seconds (total and per phase), final return and labels."""
    env = make_benchmark_vec_env(args.env, n_envs=1, seed=args.seed)
    if method == "sac":
        model: Any = SAC("MlpPolicy", env, seed=args.seed, device="cpu")
    else:
        width = dict(hidden_dim=256, n_layers=3) if args.bpref else {}
        reward_model = RewardModel(env.observation_space, env.action_space, seed=args.seed, device="cpu", **width)
        model = SAC_REWARD("MlpPolicy", env, reward_model=reward_model, teacher="oracle", seed=args.seed, device="cpu")
    timer = PhaseTimer()
    timer.wrap()
    start = time.process_time()
    try:
        model.learn(args.total_timesteps)
    finally:
        timer.unwrap()
    total = time.process_time() - start
    returns = [info["r"] for info in model.ep_info_buffer]
    learner = getattr(model, "pref_learner", None)
    env.close()
    return {
        "cpu": total,
        "phases": dict(timer.seconds),
        "return": statistics.mean(returns[-5:]) if returns else float("nan"),
        "labels": int(learner.counters()["total_feed"]) if learner is not None else 0,
    }


@probe(
    "overhead",
    "CPU of SAC_REWARD (PEBBLE) against SAC over a whole run, phase by phase",
    shared("env", default="Pendulum-v1"),
    shared("total_timesteps", default=30_000),
    shared("seed"),
    shared("repeats", default=2),
    Option("--bpref", "B-Pref's reward model (3 x 256) instead of the library's", action="store_true"),
    shared("output"),
    environ={"MUJOCO_GL": "osmesa"},
)
def overhead(args: argparse.Namespace) -> None:
    """
    The two alternate, ``--repeats`` times, at one torch thread; the table says where PEBBLE's extra CPU goes.

    :param args: the options
    """
    th.set_num_threads(1)

    results: dict[str, list[dict[str, Any]]] = {"sac": [], "pebble": []}
    for repeat in range(args.repeats):
        order = ["sac", "pebble"] if repeat % 2 == 0 else ["pebble", "sac"]
        for method in order:
            result = run_once(method, args)
            results[method].append(result)
            print(f"repeat {repeat} {method}: {result['cpu']:.1f} CPU s, return {result['return']:.1f}", flush=True)

    ratios = [p["cpu"] / s["cpu"] for p, s in zip(results["pebble"], results["sac"])]
    sac_cpu = statistics.median(r["cpu"] for r in results["sac"])
    pebble_cpu = statistics.median(r["cpu"] for r in results["pebble"])
    lines = [
        f"# PEBBLE's CPU cost over a whole run: {args.env}, {args.total_timesteps} steps",
        "",
        f"- Machine: {platform.processor() or platform.machine()} (`lscpu`: {cpu_name()}), one torch thread; "
        f"{datetime.date.today()}; sb3_pref {sb3_pref.__version__}, SB3 {stable_baselines3.__version__}, "
        f"torch {th.__version__}.",
        f"- Command: `python -m benchmarks pebble overhead --env {args.env} --total-timesteps {args.total_timesteps} "
        f"--repeats {args.repeats}{' --bpref' if args.bpref else ''}`",
        f"- Reward model: {'B-Pref (3 x 256)' if args.bpref else 'the library default (2 x 64)'}, 3 members; "
        "every other setting at its default (SAC's and SAC_REWARD's).",
        "",
        "| | SAC (true reward) | PEBBLE (oracle) |",
        "|---|---|---|",
        f"| CPU seconds (median of {args.repeats}) | {sac_cpu:.1f} | {pebble_cpu:.1f} |",
        f"| ratio to SAC (per repeat) | 1 | {', '.join(f'{r:.3f}' for r in ratios)} |",
        f"| mean return, last 5 episodes | {_mean(results['sac'], 'return')} | {_mean(results['pebble'], 'return')} |",
        f"| labels | 0 | {results['pebble'][0]['labels']} |",
        "",
        "Where PEBBLE's extra CPU goes (median seconds; share of SAC's whole run):",
        "",
        "| phase | CPU s | share of SAC's run |",
        "|---|---|---|",
    ]
    for phase in PHASES:
        seconds = statistics.median(r["phases"].get(phase, 0.0) for r in results["pebble"])
        lines.append(f"| {phase} | {seconds:.1f} | {seconds / sac_cpu:.1%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)


def _mean(results: list[dict[str, Any]], key: str) -> str:
    return f"{statistics.mean(r[key] for r in results):.1f}"
