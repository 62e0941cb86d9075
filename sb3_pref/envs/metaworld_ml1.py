"""
Meta-World 3.x ML1 as RL^2 trials: one manipulation task (``reach-v3``, ``push-v3``, ...) whose goal
positions differ between tasks; the goal is hidden from the observation, so it must be found
within a trial.

Why not ``gym.make_vec('Meta-World/ML1-train', ...)``: in Meta-World 3.1.1 the ML1 registration
binds its ``split`` late, so both ``ML1-train`` and ``ML1-test`` build the test split; it is also
vector-only, changes task only on ``sample_tasks()`` and asserts if stepped before a task is set.
Instead we build ``metaworld.ML1(env_name, seed)`` ourselves, take its ``train_tasks`` (50 goals
drawn with ``seed``) or ``test_tasks`` (50 other goals drawn with ``seed + 1``), and set one of them
on a plain single env at every trial start. Tasks are reported in ``info`` as indices into that
list. Note that ``metaworld.ML1`` seeds NumPy's global RNG while it draws the goals (it restores the
previous state afterwards); nothing here draws from the global RNG.

Rewards are Meta-World's v2 shaped rewards (0 to 10 per step) and success is ``info["success"]``
at any step of an inner episode. Consider ``VecNormalize`` for the rewards when training.
"""

from functools import lru_cache
from typing import Any, Literal, Optional

import gymnasium as gym
import numpy as np

from sb3_pref.envs.optional import install_hint
from sb3_pref.envs.trial import TrialWrapper


def _import_metaworld() -> Any:
    try:
        import metaworld
    except ImportError as error:
        raise ImportError(f"Meta-World is not installed: {install_hint('metaworld')}") from error
    return metaworld


@lru_cache(maxsize=8)
def ml1_benchmark(env_name: str, benchmark_seed: int) -> Any:
    """
    The ``metaworld.ML1`` benchmark object (cached per process: building it resets the env 100 times).

    :param env_name: a Meta-World v3 task name, e.g. ``"reach-v3"``
    :param benchmark_seed: seed of the train goals (the test goals use ``benchmark_seed + 1``)
    :return: the benchmark, with ``train_tasks`` and ``test_tasks`` (50 each)
    """
    metaworld = _import_metaworld()
    if env_name not in metaworld.ML1.ENV_NAMES:
        raise ValueError(f"env_name must be a Meta-World v3 task such as 'reach-v3' or 'push-v3', got {env_name!r}")
    return metaworld.ML1(env_name, seed=benchmark_seed)


class ML1TaskSampler:
    """
    Task sampler over one split of an ML1 benchmark. Tasks are indices into ``tasks``.

    :param env: the bare Meta-World env (``env.unwrapped``) whose task is set
    :param tasks: the split's ``metaworld.Task`` list
    """

    def __init__(self, env: gym.Env, tasks: list[Any]) -> None:
        if not tasks:
            raise ValueError("tasks must hold at least one Meta-World task, got an empty list")
        self.env = env
        self.tasks = list(tasks)

    def sample_task(self, rng: np.random.Generator) -> int:
        """Draw a task index uniformly."""
        return int(rng.integers(len(self.tasks)))

    def set_task(self, task: int) -> None:
        """Set task ``tasks[task]`` on the env (Meta-World applies it at the next reset)."""
        if not 0 <= int(task) < len(self.tasks):
            raise ValueError(f"task must be an index in [0, {len(self.tasks)}), got {task!r}")
        self.env.set_task(self.tasks[int(task)])  # type: ignore[attr-defined]  # a Meta-World env


def ml1_trials(
    env_name: str = "reach-v3",
    split: Literal["train", "test"] = "train",
    episodes_per_trial: int = 10,
    benchmark_seed: int = 0,
    max_episode_steps: Optional[int] = None,
    seed: Optional[int] = None,
) -> TrialWrapper:
    """
    An ML1 trial env, ready for ``make_vec_env``.

    :param env_name: Meta-World v3 task name
    :param split: ``"train"`` or ``"test"`` goals of ``metaworld.ML1(env_name, benchmark_seed)``
    :param episodes_per_trial: inner episodes per trial (10 in the Meta-World paper's RL^2 runs)
    :param benchmark_seed: seed of the goal sets; train and test envs must share it
    :param max_episode_steps: shorter inner episodes (at most Meta-World's 500); None keeps 500
    :param seed: seeds the Meta-World env's RNG and the trial's task generator
    :return: the wrapped env
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    benchmark = ml1_benchmark(env_name, benchmark_seed)
    tasks = benchmark.train_tasks if split == "train" else benchmark.test_tasks
    # ML1 uses the same class for both splits (only the goals differ).
    env = benchmark.train_classes[env_name]()
    if seed is not None:
        env.seed(seed)
    sampler = ML1TaskSampler(env, tasks)
    if max_episode_steps is not None:
        if not 1 <= max_episode_steps <= env.max_path_length:
            raise ValueError(f"max_episode_steps must be in [1, {env.max_path_length}], got {max_episode_steps!r}")
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    return TrialWrapper(env, episodes_per_trial, task_sampler=sampler, seed=seed)
