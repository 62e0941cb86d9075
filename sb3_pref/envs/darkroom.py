"""
DarkRoom (Laskin et al. 2022): find a hidden goal cell in a grid, then stay on it.

A ``size x size`` grid (9 x 9 by default), 5 actions (up, down, left, right, no-op), the agent starts
at the centre and gets reward 1 for every step it spends on the goal; episodes last 20 steps. The
goal is not observed, so a policy can only find it by exploring and remembering, which makes
DarkRoom the standard small test of in-context adaptation (RL^2, Algorithm Distillation).

Two variants share the class: the default one (reward on every step on the goal, episodes always
last ``episode_length`` steps), and the Algorithm Distillation variant (``terminate_on_goal=True``:
the episode ends with reward 1 when the goal is reached), with its 57 / 23 goal split
(:data:`AD_TEST_GOALS`). :func:`search_returns` gives the return per episode index of a scripted
searcher for either variant, the reference an in-context learner is compared against.
"""

from collections.abc import Sequence
from typing import Any, Literal, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3_pref.envs.trial import TrialWrapper

Goal = tuple[int, int]
ObservationMode = Literal["xy", "onehot"]

#: held-out goals of the Algorithm Distillation split: 57 training goals, 23 test goals of the 80
AD_TEST_GOALS = 23

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


def split_goals(
    seed: int, test_fraction: float = 0.2, size: int = 9, n_test: Optional[int] = None
) -> tuple[list[Goal], list[Goal]]:
    """
    Split the goals into train and test sets with a seeded permutation.

    :param seed: seed of the permutation; the same seed always gives the same split
    :param test_fraction: share of goals held out for testing (rounded, at least one goal each side)
    :param size: grid side (odd)
    :param n_test: number of held-out goals; overrides ``test_fraction`` (``AD_TEST_GOALS`` = 23 gives
        the Algorithm Distillation split of the 9 x 9 room)
    :return: ``(train_goals, test_goals)``, each sorted
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    goals = all_goals(size)
    if n_test is None:
        n_test = min(max(round(test_fraction * len(goals)), 1), len(goals) - 1)
    elif isinstance(n_test, bool) or not isinstance(n_test, (int, np.integer)) or not 1 <= n_test < len(goals):
        raise ValueError(f"n_test must be an int in [1, {len(goals) - 1}] for size {size}, got {n_test!r}")
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
    training has an untrained embedding (see ``benchmarks/rl2/README.md``).

    ``info["success"]`` is True on the steps the agent is on the goal, so an episode succeeds when it
    reaches the goal at least once. Episodes end by truncation after ``episode_length`` steps, or,
    with ``terminate_on_goal=True`` (the Algorithm Distillation variant), by termination on the
    step that reaches the goal (return 1 for a success, 0 otherwise).

    :param goals: the goals this env draws from; ``None`` means all of :func:`all_goals`
    :param size: grid side (odd)
    :param episode_length: steps per episode
    :param observation: ``"xy"`` (2 scaled coordinates) or ``"onehot"`` (``size * size`` cells)
    :param terminate_on_goal: end the episode when the goal is reached
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        goals: Optional[Sequence[Goal]] = None,
        size: int = 9,
        episode_length: int = 20,
        observation: ObservationMode = "xy",
        terminate_on_goal: bool = False,
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
        self.terminate_on_goal = bool(terminate_on_goal)
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
        With ``terminate_on_goal`` it is 1 (the goal is reachable within the episode) or 0.
        """
        x, y = self._check_goal(goal)
        distance = abs(x - self.centre[0]) + abs(y - self.centre[1])
        if self.terminate_on_goal:
            return float(distance <= self.episode_length)
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
        """Move (walls stop the agent), reward 1 on the goal (ends the episode with ``terminate_on_goal``),
        truncate after ``episode_length`` steps."""
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {len(_MOVES)}), got {action!r}")
        self._pos = np.clip(self._pos + _MOVES[int(action)], 0, self.size - 1)
        self._steps += 1
        on_goal = (int(self._pos[0]), int(self._pos[1])) == self._goal
        terminated = on_goal and self.terminate_on_goal
        truncated = self._steps >= self.episode_length and not terminated
        return self._obs(), float(on_goal), terminated, truncated, {"success": on_goal}


def darkroom_trials(
    split: Literal["train", "test", "all"] = "train",
    episodes_per_trial: int = 4,
    split_seed: int = 0,
    test_fraction: float = 0.2,
    observation: ObservationMode = "xy",
    seed: Optional[int] = None,
    n_test: Optional[int] = None,
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
    :param n_test: number of held-out goals, overriding ``test_fraction`` (see :func:`split_goals`)
    :param darkroom_kwargs: other :class:`DarkRoom` arguments (``size``, ``episode_length``, ``terminate_on_goal``)
    :return: the wrapped env
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    size = darkroom_kwargs.get("size", 9)
    train, test = split_goals(split_seed, test_fraction, size, n_test=n_test)
    goals = {"train": train, "test": test, "all": None}[split]
    env = DarkRoom(goals=goals, observation=observation, **darkroom_kwargs)
    return TrialWrapper(env, episodes_per_trial, seed=seed)


def plan_search(
    goals: Sequence[Goal],
    episodes: int,
    size: int = 9,
    episode_length: int = 20,
    terminate_on_goal: bool = False,
    beam: int = 300,
) -> list[tuple[Goal, ...]]:
    """
    A scripted searcher's paths: one fixed path per episode, each the beam-search best at covering
    the goals not covered by the earlier paths (weighted by the return a find earns: the steps left,
    or 1 with ``terminate_on_goal``). A path that only knows the training goals is what a policy
    optimal on them does; planned over :func:`all_goals`, it bounds a searcher on any goal.

    :param goals: the goals the paths are planned for
    :param episodes: number of paths
    :param size: grid side
    :param episode_length: steps per path
    :param terminate_on_goal: the variant, which sets the value of a find
    :param beam: beam width
    :return: one tuple of visited cells (after each step) per episode
    """
    _check_size(size)
    centre = (size // 2, size // 2)
    left, paths = set(goals), []
    for _ in range(episodes):
        beams: list[tuple[float, Goal, frozenset, tuple]] = [(0.0, centre, frozenset([centre]), ())]
        for step in range(1, episode_length + 1):
            best: dict = {}
            for score, (x, y), visited, path in beams:
                for dx, dy in _MOVES[:4]:
                    cell = (min(max(x + int(dx), 0), size - 1), min(max(y + int(dy), 0), size - 1))
                    new = cell in left and cell not in visited
                    gain = (1.0 if terminate_on_goal else episode_length + 1 - step) if new else 0.0
                    key = (cell, visited | {cell})
                    if key not in best or best[key][0] < score + gain:
                        best[key] = (score + gain, cell, key[1], (*path, cell))
            beams = sorted(best.values(), key=lambda b: (-b[0], -len(b[2])))[:beam]
        paths.append(beams[0][3])
        left -= set(beams[0][3])
    return paths


def search_returns(
    paths: Sequence[tuple[Goal, ...]],
    goals: Sequence[Goal],
    size: int = 9,
    episode_length: int = 20,
    terminate_on_goal: bool = False,
) -> np.ndarray:
    """
    Mean return per episode index of following ``paths`` until the goal is found, then going
    straight to it in every later episode: the search-planner reference of an adaptation curve.

    :param paths: from :func:`plan_search`
    :param goals: the goals to average over (e.g. the held-out goals)
    :param size: grid side
    :param episode_length: steps per episode
    :param terminate_on_goal: the variant
    :return: ``(len(paths),)`` mean returns
    """
    env = DarkRoom(goals=goals, size=size, episode_length=episode_length, terminate_on_goal=terminate_on_goal)
    returns = np.zeros((len(goals), len(paths)))
    for row, goal in enumerate(goals):
        found = False
        for episode, path in enumerate(paths):
            if found:
                returns[row, episode] = env.optimal_return(goal)
            elif goal in path:
                returns[row, episode] = 1.0 if terminate_on_goal else episode_length - path.index(goal)
                found = True
    return returns.mean(axis=0)
