"""
Train one source learner per DarkRoom training goal and write their learning histories.

Each (goal, learner seed) history is written to its own shard under ``<out>.parts/`` as soon as
it is done, so an interrupted run resumes where it stopped; the shards are then merged into one
``<out>`` file. ``python -m sb3_pref.ad`` is the command-line front end.
"""

import os
import time
from collections.abc import Sequence
from typing import Any, Optional, cast

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref.ad.histories import Histories, HistoryRecorder, RecordHistoryCallback
from sb3_pref.ad.learners import NoisyExpert, QLearning, make_a2c_learner
from sb3_pref.envs.darkroom import DarkRoom, Goal

LEARNERS = ("a2c", "qlearning", "noisy_expert")


def record_learner(
    goal: Goal,
    learner: str = "a2c",
    steps: int = 2_500_000,
    seed: int = 0,
    n_envs: int = 10,
    max_steps: Optional[int] = None,
    env_kwargs: Optional[dict[str, Any]] = None,
    learner_kwargs: Optional[dict[str, Any]] = None,
) -> Histories:
    """
    Train one learner on one goal and return its history.

    :param goal: the DarkRoom goal
    :param learner: ``"a2c"`` (the seed's A3C settings), ``"qlearning"`` or ``"noisy_expert"``
    :param steps: env steps the learner trains for
    :param seed: the learner's seed
    :param n_envs: parallel envs (A2C only; the cheap learners use one)
    :param max_steps: keep at most this many transitions (the seed keeps 800k of 2.5M)
    :param env_kwargs: :class:`DarkRoom` arguments besides the goal
    :param learner_kwargs: arguments of the learner
    :return: a one-row :class:`Histories`
    """
    if learner not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}, got {learner!r}")
    env_kwargs = dict(env_kwargs or {})
    learner_kwargs = dict(learner_kwargs or {})
    meta = dict(learner=learner, steps=int(steps), seed=int(seed), env="DarkRoom", env_kwargs=env_kwargs, learner_kwargs={
        k: v for k, v in learner_kwargs.items() if isinstance(v, (int, float, str, bool))
    })
    start = time.perf_counter()
    if learner == "a2c":
        venv = make_vec_env(DarkRoom, n_envs=n_envs, seed=seed, env_kwargs=dict(goals=[goal], **env_kwargs))
        model = make_a2c_learner(venv, seed=seed, **learner_kwargs)
        callback = RecordHistoryCallback(HistoryRecorder(n_envs, max_steps))
        model.learn(steps, callback=callback)
        recorder = callback.recorder
        venv.close()
        n_actions = int(cast(gym.spaces.Discrete, venv.action_space).n)
    else:
        env = DarkRoom(goals=[goal], **env_kwargs)
        recorder = HistoryRecorder(1, max_steps)
        cls = QLearning if learner == "qlearning" else NoisyExpert
        cls(env, seed=seed, **learner_kwargs).learn(steps, recorder)
        n_actions = int(cast(gym.spaces.Discrete, env.action_space).n)
    assert recorder is not None
    meta["wall_s"] = time.perf_counter() - start
    return recorder.to_histories(goal, n_actions, meta)


def collect_histories(
    goals: Sequence[Goal],
    out: str,
    learner: str = "a2c",
    steps: int = 2_500_000,
    learners_per_goal: int = 1,
    seed: int = 0,
    n_envs: int = 10,
    max_steps: Optional[int] = None,
    env_kwargs: Optional[dict[str, Any]] = None,
    learner_kwargs: Optional[dict[str, Any]] = None,
    verbose: int = 0,
) -> Histories:
    """
    Record ``learners_per_goal`` learners on each goal into ``out`` (a ``.npz``), resuming from the
    shards in ``<out>.parts/``. Learner ``k`` of goal number ``g`` uses seed ``seed + 1000 * k + g``.

    :param goals: the training goals
    :param out: the merged history file to write
    :param verbose: 1 prints a line per shard
    :return: the merged histories
    (the other parameters are those of :func:`record_learner`)
    """
    if not goals:
        raise ValueError("goals must hold at least one goal")
    if isinstance(learners_per_goal, bool) or not isinstance(learners_per_goal, int) or learners_per_goal < 1:
        raise ValueError(f"learners_per_goal must be an int >= 1, got {learners_per_goal!r}")
    parts_dir = f"{out}.parts"
    os.makedirs(parts_dir, exist_ok=True)
    parts = []
    for k in range(learners_per_goal):
        for g, goal in enumerate(goals):
            shard = os.path.join(parts_dir, f"goal_{goal[0]}_{goal[1]}_learner_{k}.npz")
            if os.path.exists(shard):
                part = Histories.load(shard)
            else:
                part = record_learner(
                    goal, learner, steps, seed + 1000 * k + g, n_envs, max_steps, env_kwargs, learner_kwargs
                )
                part.save(shard)
                if verbose:
                    returns = part.episode_returns()[0]
                    print(
                        f"goal {goal} learner {k}: {part.length} steps, {len(returns)} episodes, "
                        f"return first 10 {np.mean(returns[:10]):.2f} last 10 {np.mean(returns[-10:]):.2f}, "
                        f"{part.meta['wall_s']:.1f} s",
                        flush=True,
                    )
            parts.append(part)
    merged = Histories.concatenate(parts)
    merged.save(out)
    return merged
