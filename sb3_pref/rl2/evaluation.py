"""
Adaptation evaluation for trial-based meta-RL: returns and successes per episode index of a trial.

SB3's ``evaluate_policy`` reports one number per outer episode (here a whole trial). To see whether
a policy adapts, :func:`evaluate_adaptation` instead splits each trial into its inner episodes,
carrying the recurrent state across them exactly as in training, and returns arrays indexed
``[trial, episode_in_trial]`` that :func:`plot_adaptation` turns into an adaptation curve.
"""

import csv
import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Union, cast

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from sb3_pref.envs.trial import EPISODE_OPTIMAL_KEY, EPISODE_RETURN_KEY, EPISODE_SUCCESS_KEY, TASK_KEY


class RecurrentPredictor(Protocol):
    """Anything with RecurrentPPO's ``predict`` signature (an RL2 model, a :class:`RandomAgent`)."""

    def predict(
        self,
        observation: np.ndarray,
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]: ...


class RandomAgent:
    """
    Uniformly random actions with the ``predict`` signature of a recurrent model: the baseline an
    adaptation curve is compared against.

    :param action_space: the env's action space
    :param seed: seed of the agent's own generator
    """

    def __init__(self, action_space: gym.spaces.Space, seed: Optional[int] = None) -> None:
        self.action_space = action_space
        self.rng = np.random.default_rng(seed)
        self.action_space.seed(int(self.rng.integers(2**31)))

    def predict(
        self,
        observation: np.ndarray,
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, None]:
        """One random action per row of ``observation``; the other arguments are ignored."""
        return np.stack([self.action_space.sample() for _ in range(len(observation))]), None


def _task_key(task: Any) -> Hashable:
    if isinstance(task, np.ndarray):
        return tuple(np.round(task.ravel(), 6).tolist())
    if isinstance(task, list):
        return tuple(task)
    return task


@dataclass
class AdaptationResult:
    """
    Per-episode outcomes of ``n_trials`` evaluation trials of ``K`` episodes each.

    :param returns: ``(n_trials, K)`` return of each inner episode
    :param successes: ``(n_trials, K)`` 1.0 / 0.0, NaN where the env reports no success
    :param optimal: ``(n_trials, K)`` optimal return of the trial's task, NaN where unknown
    :param tasks: the task of each trial
    """

    returns: np.ndarray
    successes: np.ndarray
    optimal: np.ndarray
    tasks: list[Any]

    @property
    def n_trials(self) -> int:
        return int(self.returns.shape[0])

    @property
    def episodes_per_trial(self) -> int:
        return int(self.returns.shape[1])

    def summary(self, metric: str = "returns", confidence: float = 0.95) -> dict[str, np.ndarray]:
        """
        Mean and normal-approximation confidence interval per episode index.

        :param metric: ``"returns"``, ``"successes"`` or ``"optimal"``
        :param confidence: 0.9, 0.95 or 0.99
        :return: ``{"mean", "low", "high", "n"}``, each of shape ``(K,)``
        """
        z_values = {0.9: 1.645, 0.95: 1.96, 0.99: 2.576}
        if confidence not in z_values:
            raise ValueError(f"confidence must be one of {sorted(z_values)}, got {confidence!r}")
        if metric not in ("returns", "successes", "optimal"):
            raise ValueError(f"metric must be 'returns', 'successes' or 'optimal', got {metric!r}")
        values = getattr(self, metric)
        n = np.sum(np.isfinite(values), axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nansum(values, axis=0) / n
            spread = np.sqrt(np.nansum((values - mean) ** 2, axis=0) / np.maximum(n - 1, 1))
            half = z_values[confidence] * spread / np.sqrt(n)
        mean = np.where(n > 0, mean, np.nan)
        return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}

    def by_task(self) -> dict[Hashable, "AdaptationResult"]:
        """Split the trials by task (array tasks are keyed by their rounded values as a tuple)."""
        groups: dict[Hashable, list[int]] = {}
        for row, task in enumerate(self.tasks):
            groups.setdefault(_task_key(task), []).append(row)
        return {
            key: AdaptationResult(self.returns[rows], self.successes[rows], self.optimal[rows], [self.tasks[i] for i in rows])
            for key, rows in groups.items()
        }


def evaluate_adaptation(
    model: RecurrentPredictor,
    env: Union[gym.Env, VecEnv],
    n_trials: int,
    deterministic: bool = False,
    seed: Optional[int] = None,
) -> AdaptationResult:
    """
    Play ``n_trials`` trials on a trial-wrapped env (use held-out tasks to measure adaptation) and
    record every inner episode. The recurrent state is reset only at trial starts.

    ``deterministic=False`` by default, unlike SB3's ``evaluate_policy``: an RL^2 policy's exploration
    in the first episodes of a trial is part of what it learned, and taking the most likely action
    can remove it (then it stays on a wrong guess for the whole trial).

    :param model: an RL2 / RecurrentPPO model, or anything with the same ``predict``
    :param env: a ``TrialWrapper`` env or a VecEnv of them (all with the same episodes per trial)
    :param n_trials: number of trials to record, spread evenly over the envs
    :param deterministic: take the most likely actions
    :param seed: seeds the envs before the first reset
    :return: the per-episode outcomes, rows in order of completion
    """
    if isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer)) or n_trials < 1:
        raise ValueError(f"n_trials must be an int >= 1, got {n_trials!r}")
    if not isinstance(env, VecEnv):
        single_env = env
        env = DummyVecEnv([lambda: single_env])
    # A model that learned its reward shows the policy that reward, never the env's: the same at evaluation.
    prepare_eval_env = getattr(model, "prepare_eval_env", None)
    if prepare_eval_env is not None:
        env = cast(VecEnv, prepare_eval_env(env))
    episodes = set(env.get_attr("episodes_per_trial"))
    if len(episodes) != 1:
        raise ValueError(f"env must hold trial envs with one episodes_per_trial, got {sorted(episodes)}")
    n_episodes = episodes.pop()
    n_envs = env.num_envs
    # Same even split as SB3's evaluate_policy, so envs whose trials end sooner do not dominate.
    targets = np.array([(n_trials + i) // n_envs for i in range(n_envs)])
    counts = np.zeros(n_envs, dtype=int)
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, Any]] = []
    current: list[list[tuple[float, float, float]]] = [[] for _ in range(n_envs)]

    if seed is not None:
        env.seed(seed)
    observations = cast(np.ndarray, env.reset())  # trial observations are flat arrays (Box)
    states = None
    starts = np.ones(n_envs, dtype=bool)
    while np.any(counts < targets):
        actions, states = model.predict(observations, state=states, episode_start=starts, deterministic=deterministic)
        step_obs, _, dones, infos = env.step(actions)
        observations = cast(np.ndarray, step_obs)
        for i, info in enumerate(infos):
            if EPISODE_RETURN_KEY in info:
                current[i].append(
                    (
                        float(info[EPISODE_RETURN_KEY]),
                        float(info.get(EPISODE_SUCCESS_KEY, np.nan)),
                        float(info.get(EPISODE_OPTIMAL_KEY, np.nan)),
                    )
                )
            if dones[i]:
                if counts[i] < targets[i]:
                    # A trial cut short by an outer time limit keeps NaN for its missing episodes.
                    table = np.full((n_episodes, 3), np.nan)
                    done_episodes = current[i][:n_episodes]
                    if done_episodes:
                        table[: len(done_episodes)] = np.array(done_episodes)
                    rows.append((table[:, 0], table[:, 1], table[:, 2], info.get(TASK_KEY)))
                counts[i] += 1
                current[i] = []
        starts = dones
    return AdaptationResult(
        returns=np.stack([row[0] for row in rows]),
        successes=np.stack([row[1] for row in rows]),
        optimal=np.stack([row[2] for row in rows]),
        tasks=[row[3] for row in rows],
    )


def write_adaptation_csv(path: Union[str, os.PathLike], results: Mapping[str, AdaptationResult]) -> None:
    """
    Write one row per (agent, trial, episode): ``agent, trial, episode, task, return, success, optimal``.

    :param path: the CSV file to write
    :param results: results by agent name (e.g. ``{"RL2": ..., "random": ...}``)
    """
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["agent", "trial", "episode", "task", "return", "success", "optimal"])
        for name, result in results.items():
            for trial in range(result.n_trials):
                task = _task_key(result.tasks[trial])
                for episode in range(result.episodes_per_trial):
                    writer.writerow(
                        [
                            name,
                            trial,
                            episode,
                            task,
                            result.returns[trial, episode],
                            result.successes[trial, episode],
                            result.optimal[trial, episode],
                        ]
                    )


def plot_adaptation(
    results: Union[AdaptationResult, Mapping[str, AdaptationResult]],
    path: Optional[Union[str, os.PathLike]] = None,
    metric: str = "returns",
    optimal: Optional[float] = None,
    title: Optional[str] = None,
) -> Any:
    """
    Draw the adaptation curve: mean and 95% interval per episode index, one line per agent, and a
    dashed line at the optimal value (``optimal``, or the mean optimal return the env reported).

    Uses a bare ``matplotlib.figure.Figure`` (Agg canvas), so it never touches pyplot's global state.

    :param results: one result or results by agent name
    :param path: where to save the figure (PNG, ...); None only returns it
    :param metric: ``"returns"`` or ``"successes"``
    :param optimal: the reference value; None takes it from the results' ``optimal`` when finite
    :param title: figure title
    :return: the matplotlib ``Figure``
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if isinstance(results, AdaptationResult):
        results = {"agent": results}
    if metric not in ("returns", "successes"):
        raise ValueError(f"metric must be 'returns' or 'successes', got {metric!r}")
    figure = Figure(figsize=(6, 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, result in results.items():
        stats = result.summary(metric)
        x = np.arange(result.episodes_per_trial)
        axes.plot(x, stats["mean"], marker="o", label=name)
        axes.fill_between(x, stats["low"], stats["high"], alpha=0.25)
    if optimal is None and metric == "returns":
        known = [r.optimal for r in results.values() if np.isfinite(r.optimal).any()]
        optimal = float(np.nanmean(known[0])) if known else None
    if optimal is not None:
        axes.axhline(optimal, color="black", linestyle="--", label=f"optimal ({optimal:.2f})")
    axes.set_xlabel("episode in trial")
    axes.set_ylabel("return" if metric == "returns" else "success rate")
    axes.set_xticks(np.arange(max(r.episodes_per_trial for r in results.values())))
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure
