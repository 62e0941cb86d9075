"""
Bernoulli multi-armed bandits as in the RL^2 paper (Duan et al. 2016, section 4.1): ``k`` arms with
success probabilities drawn from Uniform(0, 1), ``n`` pulls per task. Each pull is a one-step episode,
so a trial of ``n`` episodes (:func:`bandit_trials`) is the paper's setting and the trial return is
the paper's total reward; its random-policy baseline is ``n / 2``.
"""

from typing import Any, Literal, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3_pref.envs.trial import TrialWrapper


def sample_bandit_tasks(n_tasks: int, n_arms: int, seed: int) -> np.ndarray:
    """
    Draw a fixed task set from the Uniform(0, 1) prior.

    :param n_tasks: number of tasks
    :param n_arms: arms per task
    :param seed: seed of the draw
    :return: ``(n_tasks, n_arms)`` success probabilities
    """
    if n_tasks < 1 or n_arms < 2:
        raise ValueError(f"n_tasks must be >= 1 and n_arms >= 2, got n_tasks={n_tasks}, n_arms={n_arms}")
    return np.random.default_rng(seed).uniform(size=(n_tasks, n_arms))


class BernoulliBandit(gym.Env):
    """
    One pull per episode: action = arm, reward ~ Bernoulli(p[arm]), then ``terminated``. The
    observation is a constant zero (everything a policy can learn from comes through the trial
    wrapper's previous action and reward). ``info["is_success"]`` is True when the pulled arm is a
    best arm. The env is its own task sampler.

    :param n_arms: number of arms
    :param tasks: ``(n_tasks, n_arms)`` probabilities to draw tasks from; ``None`` draws a fresh task
        from the Uniform(0, 1) prior every time (the paper's training distribution)
    """

    metadata = {"render_modes": []}

    def __init__(self, n_arms: int = 5, tasks: Optional[np.ndarray] = None) -> None:
        super().__init__()
        if isinstance(n_arms, bool) or not isinstance(n_arms, (int, np.integer)) or n_arms < 2:
            raise ValueError(f"n_arms must be an int >= 2, got {n_arms!r}")
        self.n_arms = int(n_arms)
        if tasks is not None:
            tasks = np.asarray(tasks, dtype=np.float64)
            if tasks.ndim != 2 or tasks.shape[1] != self.n_arms or tasks.shape[0] < 1:
                raise ValueError(f"tasks must have shape (n_tasks >= 1, n_arms={self.n_arms}), got {tasks.shape}")
        self.tasks = tasks
        self.action_space = spaces.Discrete(self.n_arms)
        self.observation_space = spaces.Box(0.0, 0.0, shape=(1,), dtype=np.float32)
        self._probs: Optional[np.ndarray] = None

    @property
    def probs(self) -> Optional[np.ndarray]:
        """Success probability of each arm in the current task."""
        return self._probs

    def sample_task(self, rng: np.random.Generator) -> np.ndarray:
        """Draw a task from ``tasks``, or from the Uniform(0, 1) prior when ``tasks`` is None."""
        if self.tasks is None:
            return rng.uniform(size=self.n_arms)
        return self.tasks[int(rng.integers(len(self.tasks)))].copy()

    def set_task(self, task: np.ndarray) -> None:
        """Set the arms' probabilities used from now on."""
        probs = np.asarray(task, dtype=np.float64)
        if probs.shape != (self.n_arms,) or np.any((probs < 0.0) | (probs > 1.0)):
            raise ValueError(f"task must be {self.n_arms} probabilities in [0, 1], got {task!r}")
        self._probs = probs

    def optimal_return(self, task: np.ndarray) -> float:
        """Expected reward of one pull of the best arm."""
        return float(np.max(task))

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a one-pull episode; draws a task with the env's RNG only if none was ever set."""
        super().reset(seed=seed)
        if self._probs is None:
            self.set_task(self.sample_task(self.np_random))
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Pull an arm."""
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {self.n_arms}), got {action!r}")
        assert self._probs is not None
        arm = int(action)
        reward = float(self.np_random.random() < self._probs[arm])
        info = {"is_success": bool(self._probs[arm] >= self._probs.max())}
        return np.zeros(1, dtype=np.float32), reward, True, False, info


def bandit_trials(
    n_arms: int = 5,
    n_pulls: int = 10,
    split: Literal["train", "test"] = "train",
    n_test_tasks: int = 500,
    split_seed: int = 0,
    seed: Optional[int] = None,
) -> TrialWrapper:
    """
    A bandit trial env of ``n_pulls`` one-pull episodes per task, ready for ``make_vec_env``.

    Train and test: the test env draws from ``n_test_tasks`` tasks fixed by ``split_seed``; the train
    env draws fresh tasks from the continuous prior, which hits a test task with probability zero.

    :param n_arms: arms per task
    :param n_pulls: pulls (one-step episodes) per trial
    :param split: ``"train"`` (fresh tasks) or ``"test"`` (the fixed held-out set)
    :param n_test_tasks: size of the held-out set
    :param split_seed: seed of the held-out set
    :param seed: seed of the trial's task generator
    :return: the wrapped env
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    tasks = sample_bandit_tasks(n_test_tasks, n_arms, split_seed) if split == "test" else None
    return TrialWrapper(BernoulliBandit(n_arms, tasks=tasks), n_pulls, seed=seed)
