"""
What the learned reward pays for along a run of the README's snippet (walker_walk, issue 41): the snippet's run as
``run.py`` trains it, with a look at every rollout after each 50k steps, scoring the reward model of that moment on
the rollout the policy just played.

    python -m benchmarks defaults shape --arm defaults --seed 0      # one run; writes shape/<arm>/seed<N>.json
    python -m benchmarks defaults shape_table                        # the table of README.md

Per look: the Pearson correlation of predicted and true per-step rewards; how often the learned reward orders 2000
random pairs of 50-step segments of the rollout as the true one does; and the mean prediction in each tenth of the
true reward's range [0, 1], which shows where the learned reward stops rising with the true one.
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
SHAPE = HERE / "shape"
from benchmarks.study import Option, probe, run_script, shared, write_json  # noqa: E402

#: env steps between two looks
EVERY = 50_000
#: segment length and pairs per look
SEGMENT, PAIRS = 50, 2000
BINS = np.linspace(0.0, 1.0, 11)


def look(predicted: np.ndarray, true: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    """
    :param predicted: ``(T, n_envs)`` learned rewards of a rollout
    :param true: ``(T, n_envs)`` its true rewards (no episode ends inside: walker_walk's rollouts of 500 steps lie
        inside its 1000-step episodes)
    :return: the look's figures
    """
    steps, n_envs = true.shape
    starts = rng.integers(0, steps - SEGMENT + 1, size=(PAIRS, 2))
    envs = rng.integers(0, n_envs, size=(PAIRS, 2))

    def segment_sums(rewards: np.ndarray) -> np.ndarray:
        cumulative = np.concatenate([np.zeros((1, n_envs)), np.cumsum(rewards, axis=0, dtype=np.float64)])
        return cumulative[starts + SEGMENT, envs] - cumulative[starts, envs]

    true_sums, predicted_sums = segment_sums(true), segment_sums(predicted)
    agree = (true_sums[:, 0] > true_sums[:, 1]) == (predicted_sums[:, 0] > predicted_sums[:, 1])
    p, t = predicted.ravel(), true.ravel()
    which = np.digitize(t, BINS[1:-1])
    return dict(
        true_mean=float(t.mean()), predicted_mean=float(p.mean()), pearson=float(np.corrcoef(p, t)[0, 1]),
        segment_agreement=float(agree.mean()), share_true_above_half=float(np.mean(t > 0.5)),
        by_tenth=[float(p[which == i].mean()) if np.any(which == i) else None for i in range(len(BINS) - 1)],
    )  # fmt: skip


@probe(
    "shape",
    "the learned reward against the true one along one walker_walk run of the README's snippet",
    Option("--arm", "an arm of run.py's ARMS (a PPO_REWARD arm)", default="defaults"),
    shared("seed"),
    environ={"MUJOCO_GL": "osmesa"},
)
def shape(args: argparse.Namespace) -> None:
    """One run; its looks and final return written to ``shape/<arm>/seed<N>.json``."""
    import torch as th

    from benchmarks.defaults.run import ARMS, TASKS, evaluate, make_env
    from sb3_pref import PPO_REWARD, RewardModel

    th.set_num_threads(1)
    spec, extra = TASKS["walker_walk"], dict(ARMS[args.arm] or {})
    if set(extra) - {"model"}:
        raise ValueError(f"--arm {args.arm}: only reward-model arms are supported here, got {sorted(extra)}")
    env, eval_env = make_env("walker_walk", spec["n_envs"], args.seed), make_env("walker_walk", 1, args.seed + 1000)
    reward_model = RewardModel(env.observation_space, env.action_space, **extra.get("model", {}))
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=spec["labels"], seed=args.seed,
        verbose=0, **spec["ppo"],
    )  # fmt: skip
    rng, looks, next_look = np.random.default_rng(args.seed), [], [EVERY]
    finish_rollout = model._finish_rollout

    def finish_and_look(obs: np.ndarray, actions: np.ndarray, true: np.ndarray, *rest: Any, **kwargs: Any) -> None:
        finish_rollout(obs, actions, true, *rest, **kwargs)
        if model.num_timesteps >= next_look[0]:
            next_look[0] += EVERY
            predicted = model.pref_learner.predict_rewards(obs, actions)
            looks.append(dict(step=int(model.num_timesteps), **look(predicted, true, rng)))

    model._finish_rollout = finish_and_look  # the seam the rollout recorder hands each finished rollout to
    cpu = time.process_time()
    model.learn(spec["steps"])
    result = dict(
        arm=args.arm, seed=args.seed, looks=looks, final=evaluate(model, eval_env, 20),
        cpu_seconds=time.process_time() - cpu, plan=model.feedback_plan.to_dict(),
    )  # fmt: skip
    path = SHAPE / args.arm / f"seed{args.seed}.json"
    write_json(path, result)
    print(path, result["final"], flush=True)


@probe("shape_table", "the table of the reward-shape runs, from their files", shared("output"))
def shape_table(args: argparse.Namespace) -> None:
    """Per run: the final return; correlation and agreement averaged over the looks after 400k steps; the mean
    prediction per tenth of the true reward over the same looks."""
    lines = [
        "| arm | seed | final return | Pearson | segment agreement | mean prediction where the true reward is in "
        "[0, .1) [.1, .2) ... [.9, 1] |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(SHAPE.glob("*/seed*.json")):
        run = json.loads(path.read_text())
        late = [row for row in run["looks"] if row["step"] >= 400_000]
        tenths = np.array([[np.nan if v is None else v for v in row["by_tenth"]] for row in late], dtype=float)
        cells = " ".join("-" if np.all(np.isnan(c)) else f"{np.nanmean(c):.2f}" for c in tenths.T)
        lines.append(
            f"| {run['arm']} | {run['seed']} | {run['final']:.1f} | {np.mean([r['pearson'] for r in late]):.2f} | "
            f"{np.mean([r['segment_agreement'] for r in late]):.2f} | {cells} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    run_script(shape)
