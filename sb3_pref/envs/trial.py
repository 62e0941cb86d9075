"""
Trials for recurrent meta-RL (RL^2): K inner episodes of one task played as one outer episode.

A :class:`TrialWrapper` samples a task at its own ``reset``, resets the inner env itself when an
inner episode ends (without reporting ``done``), and reports ``terminated=True`` only after the
K-th inner episode. Observations are ``[obs, previous action, previous reward, previous inner done]``
so that a recurrent policy can infer the task from its own history; see :class:`TrialObservationLayout`.
"""

from dataclasses import dataclass
from typing import Any, Optional, Protocol, SupportsFloat, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# Keys the wrapper adds to ``info``. Every step carries the index of the inner episode the step
# belongs to; the step that ends an inner episode also carries that episode's return, its success
# (only when the inner env reports ``success`` or ``is_success``), its optimal return (only when the
# task family knows it) and the task, so that callbacks and evaluation never need to track episodes.
EPISODE_INDEX_KEY = "trial_episode"
EPISODE_RETURN_KEY = "trial_episode_return"
EPISODE_SUCCESS_KEY = "trial_episode_success"
EPISODE_OPTIMAL_KEY = "trial_episode_optimal_return"
TASK_KEY = "trial_task"


@runtime_checkable
class TaskSampler(Protocol):
    """
    What a :class:`TrialWrapper` needs from a task family. The train/test split lives in the
    sampler: a train env and a test env are built with samplers over different task sets.
    A sampler may also define ``optimal_return(task) -> float`` (the best expected return of one
    inner episode), which the wrapper then reports in ``info``.
    """

    def sample_task(self, rng: np.random.Generator) -> Any:
        """Draw a task from this sampler's task set with the given generator."""
        ...

    def set_task(self, task: Any) -> None:
        """Make the inner env play ``task`` from its next reset on."""
        ...


@dataclass(frozen=True)
class TrialObservationLayout:
    """
    Where each part sits in a trial observation (a flat float32 vector). At a trial's first step
    the previous action, reward and done are all zero; after an inner episode ends, the next
    inner episode's first observation carries that episode's last action and reward, and done = 1.

    :param obs: slice of the flattened inner observation
    :param prev_action: slice of the previous action (one-hot for discrete actions)
    :param prev_reward: slice (width 1) of the previous reward, the slot a learned reward may overwrite
    :param prev_done: slice (width 1) of the previous inner-episode done flag
    """

    obs: slice
    prev_action: slice
    prev_reward: slice
    prev_done: slice

    @property
    def size(self) -> int:
        """Total width of a trial observation."""
        return self.prev_done.stop

    @property
    def prev_reward_index(self) -> int:
        """Column of the previous reward, for code that indexes a single column."""
        return self.prev_reward.start


def _flat_box(space: spaces.Space, argument: str) -> spaces.Box:
    try:
        flat = spaces.flatten_space(space)
    except NotImplementedError as error:
        raise ValueError(
            f"{argument} of type {type(space).__name__} cannot be flattened: use Box, Discrete or Dict."
        ) from error
    if not isinstance(flat, spaces.Box):
        raise ValueError(f"{argument} of type {type(space).__name__} does not flatten to a Box: use Box, Discrete or Dict.")
    return flat


class TrialWrapper(gym.Wrapper):
    """
    Plays ``episodes_per_trial`` inner episodes of one task as a single outer episode.

    The outer episode ends with ``terminated=True`` (never ``truncated``): a trial has a fixed number
    of episodes, so nothing is worth bootstrapping after it. Inner episode ends, whether terminated
    or truncated, only set the previous-done slot of the next observation. When the trial ends,
    ``info["is_success"]`` is the success of its last inner episode (when known), so SB3's
    ``rollout/success_rate`` reports the adapted success.

    :param env: the inner env; its observation space must flatten to a Box
    :param episodes_per_trial: number of inner episodes per trial (K)
    :param task_sampler: the task family; ``None`` uses ``env.unwrapped`` when it implements
        :class:`TaskSampler` (as ``DarkRoom`` and ``BernoulliBandit`` do)
    :param seed: seed of the task generator; ``reset(seed=...)`` re-seeds it
    """

    def __init__(
        self,
        env: gym.Env,
        episodes_per_trial: int,
        task_sampler: Optional[TaskSampler] = None,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__(env)
        if (
            isinstance(episodes_per_trial, bool)
            or not isinstance(episodes_per_trial, (int, np.integer))
            or episodes_per_trial < 1
        ):
            raise ValueError(f"episodes_per_trial must be an int >= 1, got {episodes_per_trial!r}")
        if task_sampler is None:
            task_sampler = env.unwrapped  # type: ignore[assignment]
        if not isinstance(task_sampler, TaskSampler):
            raise ValueError(
                f"task_sampler must define sample_task(rng) and set_task(task); {type(task_sampler).__name__} does not. "
                "Pass a sampler object, or an inner env that implements both methods."
            )
        self.episodes_per_trial = int(episodes_per_trial)
        self.task_sampler = task_sampler

        inner_obs = _flat_box(env.observation_space, "env.observation_space")
        inner_act = _flat_box(env.action_space, "env.action_space")
        obs_dim, act_dim = inner_obs.shape[0], inner_act.shape[0]
        self.layout = TrialObservationLayout(
            obs=slice(0, obs_dim),
            prev_action=slice(obs_dim, obs_dim + act_dim),
            prev_reward=slice(obs_dim + act_dim, obs_dim + act_dim + 1),
            prev_done=slice(obs_dim + act_dim + 1, obs_dim + act_dim + 2),
        )
        # A zero action is outside a Box action space that excludes 0, so the action bounds are widened
        # to include the all-zero "no previous action" of a trial's first step.
        low = np.concatenate([inner_obs.low, np.minimum(inner_act.low, 0.0), [-np.inf, 0.0]]).astype(np.float32)
        high = np.concatenate([inner_obs.high, np.maximum(inner_act.high, 0.0), [np.inf, 1.0]]).astype(np.float32)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)

        self._task_rng = np.random.default_rng(seed)
        self._task: Any = None
        self._optimal: Optional[float] = None
        self._episode = 0
        self._episode_return = 0.0
        self._episode_success: Optional[bool] = None

    @property
    def task(self) -> Any:
        """The task of the current trial (``None`` before the first reset)."""
        return self._task

    @property
    def episode_index(self) -> int:
        """Index of the current inner episode within the trial."""
        return self._episode

    def _encode(self, obs: Any, action: Any, reward: float, done: bool) -> np.ndarray:
        out = np.zeros(self.layout.size, dtype=np.float32)
        if isinstance(self.env.observation_space, spaces.Box):
            out[self.layout.obs] = np.asarray(obs, dtype=np.float32).ravel()
        else:
            out[self.layout.obs] = spaces.flatten(self.env.observation_space, obs)  # type: ignore[assignment]
        if action is not None:
            if isinstance(self.env.action_space, spaces.Discrete):
                out[self.layout.prev_action.start + int(action) - int(self.env.action_space.start)] = 1.0
            elif isinstance(self.env.action_space, spaces.Box):
                out[self.layout.prev_action] = np.asarray(action, dtype=np.float32).ravel()
            else:
                out[self.layout.prev_action] = spaces.flatten(self.env.action_space, action)  # type: ignore[assignment]
        out[self.layout.prev_reward] = reward
        out[self.layout.prev_done] = float(done)
        return out

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """
        Start a trial: draw a task (or take ``options["task"]``), set it, reset the inner env.

        :param seed: re-seeds the task generator and, through a separate stream, the inner env
        :param options: ``{"task": task}`` forces the trial's task; other keys go to the inner env
        :return: the first observation and the inner env's reset info plus the trial keys
        """
        inner_seed = None
        if seed is not None:
            task_seq, env_seq = np.random.SeedSequence(seed).spawn(2)
            self._task_rng = np.random.default_rng(task_seq)
            inner_seed = int(env_seq.generate_state(1)[0])
        options = dict(options or {})
        task = options.pop("task") if "task" in options else self.task_sampler.sample_task(self._task_rng)
        self.task_sampler.set_task(task)
        self._task = task
        optimal = getattr(self.task_sampler, "optimal_return", None)
        self._optimal = float(optimal(task)) if callable(optimal) else None
        obs, info = self.env.reset(seed=inner_seed, options=options or None)
        self._start_episode(0)
        info = {**info, EPISODE_INDEX_KEY: 0, TASK_KEY: task}
        return self._encode(obs, None, 0.0, False), info

    def _start_episode(self, index: int) -> None:
        self._episode = index
        self._episode_return = 0.0
        self._episode_success = None

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """
        Step the inner env; at an inner episode's end, report it in ``info`` and reset the inner env
        (or end the trial after the last one).

        :param action: an action of the inner env
        :return: ``(obs, reward, trial_terminated, False, info)``
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward)
        self._episode_return += reward
        success = info.get("success", info.get("is_success"))
        if success is not None:
            self._episode_success = bool(self._episode_success) or bool(success)
        info = {**info, EPISODE_INDEX_KEY: self._episode}
        inner_done = bool(terminated or truncated)
        trial_done = False
        if inner_done:
            info[EPISODE_RETURN_KEY] = self._episode_return
            info[TASK_KEY] = self._task
            if self._episode_success is not None:
                info[EPISODE_SUCCESS_KEY] = self._episode_success
            if self._optimal is not None:
                info[EPISODE_OPTIMAL_KEY] = self._optimal
            if self._episode + 1 >= self.episodes_per_trial:
                trial_done = True
                if self._episode_success is not None:
                    info["is_success"] = self._episode_success
            else:
                # The inner env restarts under the same task; its reset info is dropped on purpose,
                # the trial keys above describe the episode that just ended.
                obs, _ = self.env.reset()
                self._start_episode(self._episode + 1)
        return self._encode(obs, action, reward, inner_done), reward, trial_done, False, info
