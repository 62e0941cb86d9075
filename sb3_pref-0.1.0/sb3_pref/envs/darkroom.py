"""
DarkRoom (Laskin et al. 2022): find a hidden goal cell in a grid, then stay on it.

A ``size x size`` grid (9 x 9 by default), 5 actions (up, down, left, right, no-op), the agent starts
at the centre and gets reward 1 for every step it spends on the goal; episodes last 20 steps. The
goal is not observed, so a policy can only find it by exploring and remembering, which makes
DarkRoom the standard small test of in-context adaptation (RL^2, Algorithm Distillation).
"""

from collections.abc import Sequence
from typing import Any, Literal, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3_pref.envs.trial import TrialWrapper

Goal = tuple[int, int]
ObservationMode = Literal["xy", "onehot"]

# (dx, dy) of up, down, left, right, no-op; y grows upwards.
_MOVES = np.array([(0, 1), (0, -1), (-1, 0), (1, 0), (0, 0)], dtype=np.int64)


def _check_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 3 or size % 2 == 0:
        raise ValueError(f"size must be an odd int >= 3 so that the grid has a centre, got {size!r}")


def all_goals(size: int = 9) -> list[Goal]:
    """
    Every cell except the centre, in row-major order (80 goals on a 9 x 9 grid).

    :param size: grid side (odd)
    :return: the list of ``(x, y)`` goals
    """
    _check_size(size)
    centre = size // 2
    return [(x, y) for y in range(size) for x in range(size) if (x, y) != (centre, centre)]


def split_goals(seed: int, test_fraction: float = 0.2, size: int = 9) -> tuple[list[Goal], list[Goal]]:
    """
    Split the goals into train and test sets with a seeded permutation.

    :param seed: seed of the permutation; the same seed always gives the same split
    :param test_fraction: share of goals held out for testing (rounded, at least one goal each side)
    :param size: grid side (odd)
    :return: ``(train_goals, test_goals)``, each sorted
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    goals = all_goals(size)
    n_test = min(max(round(test_fraction * len(goals)), 1), len(goals) - 1)
    order = np.random.default_rng(seed).permutation(len(goals))
    test = sorted(goals[i] for i in order[:n_test])
    train = sorted(goals[i] for i in order[n_test:])
    return train, test


class DarkRoom(gym.Env):
    """
    The DarkRoom grid. It is also its own task sampler (``sample_task`` / ``set_task``), over the
    goals it was built with, so ``TrialWrapper(DarkRoom(goals=train_goals), K)`` is a train env.

    Observation (``observation="xy"``, the default): the agent's ``(x, y)`` scaled to [0, 1]. It learns
    better than ``"onehot"`` (81 cells) on held-out goals: a goal remembered as coordinates can be
    reached from any cell by comparing numbers, while a one-hot goal cell that never held a goal in
    training has an untrained embedding (see ``benchmarks/RL2.md``).

    ``info["success"]`` is True on the steps the agent is on the goal, so an episode succeeds when it
    reaches the goal at least once. Episodes end by truncation after ``episode_length`` steps.

    :param goals: the goals this env draws from; ``None`` means all of :func:`all_goals`
    :param size: grid side (odd)
    :param episode_length: steps per episode
    :param observation: ``"xy"`` (2 scaled coordinates) or ``"onehot"`` (``size * size`` cells)
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        goals: Optional[Sequence[Goal]] = None,
        size: int = 9,
        episode_length: int = 20,
        observation: ObservationMode = "xy",
    ) -> None:
        super().__init__()
        _check_size(size)
        if isinstance(episode_length, bool) or not isinstance(episode_length, (int, np.integer)) or episode_length < 1:
            raise ValueError(f"episode_length must be an int >= 1, got {episode_length!r}")
        if observation not in ("xy", "onehot"):
            raise ValueError(f"observation must be 'xy' or 'onehot', got {observation!r}")
        self.size = int(size)
        self.episode_length = int(episode_length)
        self.observation = observation
        self.centre: Goal = (self.size // 2, self.size // 2)
        self.goals: list[Goal] = [self._check_goal(goal) for goal in (goals if goals is not None else all_goals(size))]
        if not self.goals:
            raise ValueError("goals must hold at least one goal, got an empty sequence")
        self.action_space = spaces.Discrete(len(_MOVES))
        obs_dim = 2 if observation == "xy" else self.size * self.size
        self.observation_space = spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self._goal: Optional[Goal] = None
        self._pos = np.array(self.centre, dtype=np.int64)
        self._steps = 0

    def _check_goal(self, goal: Any) -> Goal:
        x, y = (int(v) for v in goal)
        if not (0 <= x < self.size and 0 <= y < self.size) or (x, y) == self.centre:
            raise ValueError(f"goal must be a non-centre cell (x, y) of the {self.size}x{self.size} grid, got {goal!r}")
        return (x, y)

    @property
    def goal(self) -> Optional[Goal]:
        """The current goal (``None`` before the first ``set_task`` or ``reset``)."""
        return self._goal

    def sample_task(self, rng: np.random.Generator) -> Goal:
        """Draw a goal uniformly from this env's goals."""
        return self.goals[int(rng.integers(len(self.goals)))]

    def set_task(self, task: Goal) -> None:
        """Set the goal used from the next reset on (any valid cell, not only this env's goals)."""
        self._goal = self._check_goal(task)

    def optimal_return(self, goal: Goal) -> float:
        """
        Best return of one episode: walk the Manhattan distance ``d`` to the goal, then stay,
        collecting reward on every step from the arrival on: ``episode_length + 1 - d`` (21 - d by default).
        """
        x, y = self._check_goal(goal)
        distance = abs(x - self.centre[0]) + abs(y - self.centre[1])
        return float(max(self.episode_length + 1 - distance, 0))

    def _obs(self) -> np.ndarray:
        if self.observation == "xy":
            return (self._pos / (self.size - 1)).astype(np.float32)
        obs = np.zeros(self.size * self.size, dtype=np.float32)
        obs[self._pos[1] * self.size + self._pos[0]] = 1.0
        return obs

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Put the agent at the centre; draws a goal with the env's RNG only if none was ever set."""
        super().reset(seed=seed)
        if self._goal is None:
            self._goal = self.sample_task(self.np_random)
        self._pos = np.array(self.centre, dtype=np.int64)
        self._steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move (walls stop the agent), reward 1 on the goal, truncate after ``episode_length`` steps."""
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {len(_MOVES)}), got {action!r}")
        self._pos = np.clip(self._pos + _MOVES[int(action)], 0, self.size - 1)
        self._steps += 1
        on_goal = (int(self._pos[0]), int(self._pos[1])) == self._goal
        truncated = self._steps >= self.episode_length
        return self._obs(), float(on_goal), False, truncated, {"success": on_goal}


def darkroom_trials(
    split: Literal["train", "test", "all"] = "train",
    episodes_per_trial: int = 4,
    split_seed: int = 0,
    test_fraction: float = 0.2,
    observation: ObservationMode = "xy",
    seed: Optional[int] = None,
    **darkroom_kwargs: Any,
) -> TrialWrapper:
    """
    A DarkRoom trial env over one side of a seeded goal split, ready for ``make_vec_env``.

    :param split: ``"train"``, ``"test"`` (held-out goals) or ``"all"`` goals
    :param episodes_per_trial: inner episodes per trial
    :param split_seed: seed of :func:`split_goals`; train and test envs must share it
    :param test_fraction: share of held-out goals
    :param observation: see :class:`DarkRoom`
    :param seed: seed of the trial's task generator
    :param darkroom_kwargs: other :class:`DarkRoom` arguments (``size``, ``episode_length``)
    :return: the wrapped env
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    size = darkroom_kwargs.get("size", 9)
    train, test = split_goals(split_seed, test_fraction, size)
    goals = {"train": train, "test": test, "all": None}[split]
    env = DarkRoom(goals=goals, observation=observation, **darkroom_kwargs)
    return TrialWrapper(env, episodes_per_trial, seed=seed)
