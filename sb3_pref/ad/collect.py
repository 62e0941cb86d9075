"""
Train one source learner per DarkRoom training goal and write their learning histories.

Each (goal, learner seed) history is written to its own shard under ``<out>.parts/`` as soon as
it is done, so an interrupted run resumes where it stopped; the shards are then merged into one
``<out>`` file. ``python -m sb3_pref.ad`` is the command-line front end.
"""

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Optional, Union, cast

import gymnasium as gym
import numpy as np
from stable_baselines3 import A2C, DQN
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref.ad.histories import Histories, HistoryRecorder, RecordHistoryCallback
from sb3_pref.ad.learners import DQN_TABULAR_SETTINGS, NoisyExpert, QLearning, make_a2c_learner, make_dqn_learner
from sb3_pref.envs.darkroom import DarkRoom, Goal

LEARNERS = ("a2c", "dqn", "qlearning", "noisy_expert")


class CollectionIncomplete(RuntimeError):
    """Raised by :func:`collect_histories` when its ``deadline`` passed before every shard was recorded."""


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
    :param learner: ``"a2c"`` (the seed's A3C settings), ``"dqn"`` (:func:`make_dqn_learner`, one env),
        ``"qlearning"`` or ``"noisy_expert"``
    :param steps: env steps the learner trains for
    :param seed: the learner's seed
    :param n_envs: parallel envs (A2C only; DQN and the cheap learners use one)
    :param max_steps: keep at most this many transitions (the seed keeps 800k of 2.5M)
    :param env_kwargs: :class:`DarkRoom` arguments besides the goal
    :param learner_kwargs: arguments of the learner
    :return: a one-row :class:`Histories`
    """
    if learner not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}, got {learner!r}")
    env_kwargs = dict(env_kwargs or {})
    learner_kwargs = dict(learner_kwargs or {})
    # DQN's defaults are written out too: they changed once (benchmarks/ad/README.md, sixth run), and a history file must say
    # which learner made it
    described = {**DQN_TABULAR_SETTINGS, **learner_kwargs} if learner == "dqn" else learner_kwargs
    meta = dict(
        learner=learner,
        steps=int(steps),
        seed=int(seed),
        env="DarkRoom",
        env_kwargs=env_kwargs,
        learner_kwargs={k: v for k, v in described.items() if isinstance(v, (int, float, str, bool))},
    )
    start = time.perf_counter()
    if learner in ("a2c", "dqn"):
        n_envs = n_envs if learner == "a2c" else 1
        venv = make_vec_env(DarkRoom, n_envs=n_envs, seed=seed, env_kwargs=dict(goals=[goal], **env_kwargs))
        model: Union[A2C, DQN] = (make_a2c_learner if learner == "a2c" else make_dqn_learner)(venv, seed, **learner_kwargs)
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


def _record_shard(shard: str, args: tuple[Any, ...]) -> tuple[str, Histories]:
    part = record_learner(*args)
    part.save(shard)
    return shard, part


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
    workers: int = 1,
    deadline: Optional[float] = None,
) -> Histories:
    """
    Record ``learners_per_goal`` learners on each goal into ``out`` (a ``.npz``), resuming from the
    shards in ``<out>.parts/``. Learner ``k`` of goal number ``g`` uses seed ``seed + 1000 * k + g``.

    :param goals: the training goals
    :param out: the merged history file to write
    :param verbose: 1 prints a line per shard
    :param workers: processes recording shards in parallel (each learner runs on one CPU thread)
    :param deadline: a ``time.monotonic()`` value: no shard starts that the slowest learner so far
        would not finish before it; shards already running are finished, then
        :class:`CollectionIncomplete` is raised if any is missing (call again to continue)
    :return: the merged histories
    (the other parameters are those of :func:`record_learner`)
    """
    if not goals:
        raise ValueError("goals must hold at least one goal")
    if isinstance(learners_per_goal, bool) or not isinstance(learners_per_goal, int) or learners_per_goal < 1:
        raise ValueError(f"learners_per_goal must be an int >= 1, got {learners_per_goal!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    parts_dir = f"{out}.parts"
    os.makedirs(parts_dir, exist_ok=True)
    shards, todo = [], []
    for k in range(learners_per_goal):
        for g, goal in enumerate(goals):
            shard = os.path.join(parts_dir, f"goal_{goal[0]}_{goal[1]}_learner_{k}.npz")
            shards.append(shard)
            if not os.path.exists(shard):
                args = (goal, learner, steps, seed + 1000 * k + g, n_envs, max_steps, env_kwargs, learner_kwargs)
                todo.append((shard, args))
    done: dict[str, Histories] = {}
    durations: list[float] = []

    def report(shard: str, part: Histories) -> None:
        done[shard] = part
        # The learner's own time: workers live for the whole call, so only the first shards pay their start-up.
        durations.append(float(part.meta["wall_s"]))
        if verbose:
            returns = part.episode_returns()[0]
            print(
                f"{os.path.basename(shard)}: {part.length} steps, {len(returns)} episodes, return first 10 "
                f"{np.mean(returns[:10]):.2f} last 10 {np.mean(returns[-10:]):.2f}, {part.meta['wall_s']:.1f} s",
                flush=True,
            )

    def time_left() -> bool:
        # A shard is not started when the slowest one so far would not end before the deadline.
        return deadline is None or time.monotonic() + max(durations, default=0.0) < deadline

    if workers == 1:
        for shard, args in todo:
            if not time_left():
                break
            report(*_record_shard(shard, args))
    elif todo:
        _record_in_parallel(todo, workers, time_left, report)
    missing = [shard for shard, _ in todo if shard not in done]
    if missing:
        raise CollectionIncomplete(f"{len(shards) - len(missing)} of {len(shards)} histories recorded in {parts_dir}")
    parts = [done[shard] if shard in done else Histories.load(shard) for shard in shards]
    merged = Histories.concatenate(parts)
    merged.save(out)
    return merged


def _record_in_parallel(
    todo: list[tuple[str, tuple[Any, ...]]],
    workers: int,
    time_left: Callable[[], bool],
    report: Callable[[str, Histories], None],
) -> None:
    # spawn: a forked child would inherit torch's thread pools and any CUDA state of the parent
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread) as pool:
        queue, running = list(todo), set[Future[tuple[str, Histories]]]()
        while queue or running:
            while queue and len(running) < workers and time_left():
                future = pool.submit(_record_shard, *queue.pop(0))
                running.add(future)
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                report(*future.result())


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
