"""
What the learned reward pays for along a run of the defaults, two ways.

**Per step** (``shape``): the README snippet's run (walker_walk, issue 41) as ``run.py`` trains it, with a look at
every rollout after each 50k steps, scoring the reward model of that moment on the rollout the policy just played.

    python -m benchmarks defaults shape --arm defaults --seed 0      # one run; writes shape/<arm>/seed<N>.json
    python -m benchmarks defaults shape_table                        # the table of README.md

Per look: the Pearson correlation of predicted and true per-step rewards; how often the learned reward orders 2000
random pairs of 50-step segments of the rollout as the true one does; and the mean prediction in each tenth of the
true reward's range [0, 1], which shows where the learned reward stops rising with the true one.

**Per episode** (``episodes``): does the learned reward rank whole episodes as the true one does, once labelling is
over? Swing-up's learning curves swing by hundreds between evaluations for every arm (``../successors/README.md``);
this tells a reward that pays as much for a spun pole as for a balanced one (the reward's fault) from a reward that
ranks them right and a policy that does not hold what it found (PPO's).

    python -m benchmarks defaults episodes --task cartpole_swingup --seed 0   # writes episodes/<task>/seed<N>.json
    python -m benchmarks defaults episodes_table                               # tables_episodes.md

Every tenth of the run, 5 deterministic episodes (envs seeded ``seed + 1000``, as ``run.py``'s evaluations) are
played and scored twice: their true return, and their return under the reward model of that moment (normalised as
the policy sees it). Only the looks after the plan's last label share one reward model, so only those are ranked.
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
EPISODES = HERE / "episodes"
from benchmarks.study import Option, probe, run_script, shared, write_json  # noqa: E402

#: env steps between two looks
EVERY = 50_000
#: segment length and pairs per look
SEGMENT, PAIRS = 50, 2000
BINS = np.linspace(0.0, 1.0, 11)
#: evaluation episodes per look of ``episodes``
PER_LOOK = 5


def defaults_run(task: str, seed: int, model_kwargs: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """
    :return: ``PPO_REWARD`` at its defaults on one of ``run.py``'s dm_control PPO tasks (the oracle teacher, the
        task's labels), its envs (training, and evaluation seeded ``seed + 1000``) and the task's settings
    """
    import torch as th

    from benchmarks.defaults.run import TASKS, make_env
    from sb3_pref import PPO_REWARD, RewardModel

    th.set_num_threads(1)
    spec = TASKS[task]
    if spec.get("sac") or spec.get("normalize_obs") or task.startswith("Pendulum"):
        raise ValueError(f"--task {task}: only the dm_control PPO tasks without VecNormalize are supported")
    env, eval_env = make_env(task, spec["n_envs"], seed), make_env(task, 1, seed + 1000)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space, **model_kwargs),
        teacher="oracle", max_feed=spec["labels"], seed=seed, verbose=0, **spec["ppo"],
    )  # fmt: skip
    return model, env, eval_env, spec


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
    from benchmarks.defaults.run import ARMS, evaluate

    extra = dict(ARMS[args.arm] or {})
    if set(extra) - {"model"}:
        raise ValueError(f"--arm {args.arm}: only reward-model arms are supported here, got {sorted(extra)}")
    model, _, eval_env, spec = defaults_run("walker_walk", args.seed, extra.get("model", {}))
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


def play(model: Any, env: Any, episodes: int) -> list[dict[str, float]]:
    """
    :param model: a PPO_REWARD model (its policy acts deterministically, its reward model scores)
    :param env: a one-env VecEnv
    :return: per episode its true and its learned return
    """
    scored = []
    for _ in range(episodes):
        obs, done, observations, actions, rewards = env.reset(), False, [], [], []
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            observations.append(obs[0])
            actions.append(action[0])
            obs, reward, dones, _ = env.step(action)
            rewards.append(float(reward[0]))
            done = bool(dones[0])
        learned = model.pref_learner.predict_rewards(np.asarray(observations), np.asarray(actions))
        scored.append(dict(true=float(np.sum(rewards)), learned=float(np.sum(learned))))
    return scored


@probe(
    "episodes",
    "whole evaluation episodes scored by the true and the learned reward along one run of the defaults",
    Option("--task", "a dm_control task of run.py's TASKS", default="cartpole_swingup"),
    shared("seed"),
    environ={"MUJOCO_GL": "osmesa"},
)
def episodes(args: argparse.Namespace) -> None:
    """One run; its looks written to ``episodes/<task>/seed<N>.json``."""
    from stable_baselines3.common.callbacks import BaseCallback

    model, _, eval_env, spec = defaults_run(args.task, args.seed, {})
    every, looks = spec["steps"] // 10, []

    class EveryTenth(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps // every > len(looks):
                rounds = model.pref_learner.n_rounds
                looks.append(dict(step=int(self.num_timesteps), rounds=rounds, episodes=play(model, eval_env, PER_LOOK)))
            return True

    cpu = time.process_time()
    model.learn(spec["steps"], callback=EveryTenth())
    plan = model.feedback_plan
    last_label = max(step for step, _ in plan.rounds())
    result = dict(
        task=args.task, seed=args.seed, last_label=last_label, looks=looks, plan=plan.to_dict(),
        cpu_seconds=time.process_time() - cpu,
    )  # fmt: skip
    path = EPISODES / args.task / f"seed{args.seed}.json"
    write_json(path, result)
    print(path, flush=True)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (no ties expected among continuous returns)."""
    ranks_a, ranks_b = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ranks_a, ranks_b)[0, 1])


@probe("episodes_table", "the table of the episode-score runs, from their files", shared("output"))
def episodes_table(args: argparse.Namespace) -> None:
    """Per run, over the looks after its last label: the rank correlation of learned and true episode returns, and
    the learned return of its best and of its worst episodes by true return."""
    lines = [
        "| task | seed | episodes after the last label | true return, min-max | Spearman (learned, true) | "
        "learned return: the 5 truly best / the 5 truly worst | truly worst ranked above the truly best |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(EPISODES.glob("*/seed*.json")):
        run = json.loads(path.read_text())
        late = [e for look in run["looks"] if look["step"] > run["last_label"] for e in look["episodes"]]
        true = np.array([e["true"] for e in late])
        learned = np.array([e["learned"] for e in late])
        order = np.argsort(true)
        worst, best = order[:PER_LOOK], order[-PER_LOOK:]
        inverted = int(np.sum(learned[worst][:, None] > learned[best][None, :]))
        lines.append(
            f"| {run['task']} | {run['seed']} | {len(late)} | {true.min():.0f}-{true.max():.0f} | "
            f"{spearman(learned, true):.2f} | {learned[best].mean():.1f} / {learned[worst].mean():.1f} | "
            f"{inverted} of {PER_LOOK * PER_LOOK} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    run_script(shape)
