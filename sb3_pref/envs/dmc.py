"""dm_control suite tasks as gymnasium environments, with the B-Pref ``domain_task`` naming."""

import difflib
import re
from typing import Any, Callable, Optional, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.envs.optional import VecEnvClass, import_optional
from sb3_pref.envs.registration import NAMESPACE, dmc_gym_id

_PREFIXES = ("dm_control/", "dm_control_", "dmc_", "dmc/")
_EXAMPLES = "walker_walk, quadruped_walk, cheetah_run, ball_in_cup_catch"
#: :func:`~sb3_pref.envs.registration.dmc_gym_id`'s form
_GYM_ID = re.compile(rf"{NAMESPACE}/dmc-(?P<domain>[^-/]+)-(?P<task>[^-/]+)-v0")


def _suite() -> Any:
    suite = import_optional("dm_control.suite", "dmc")
    _patch_quadruped_sensor_lookup(suite)
    return suite


def _patch_quadruped_sensor_lookup(suite: Any) -> None:
    """
    Make dm_control 1.0.28's quadruped (a B-Pref task) run on NumPy >= 2.4.

    Its sensor lookup calls ``np.in1d``, deprecated in NumPy 2.0 and gone in 2.4; the dm_control
    releases that fixed it need a MuJoCo newer than Meta-World 3.1.1 allows. The replacement below computes the
    same cached sensor-name lists with ``np.isin`` and is installed only when ``in1d`` is missing.
    """
    physics_class = suite.quadruped.Physics
    if hasattr(np, "in1d") or getattr(physics_class, "_sb3_pref_isin_patch", False):
        return

    def _get_sensor_names(self: Any, *sensor_types: int) -> list[str]:
        names = self._sensor_types_to_names.get(sensor_types)
        if names is None:
            sensor_ids = np.flatnonzero(np.isin(self.model.sensor_type, sensor_types))
            names = [self.model.id2name(sensor_id, "sensor") for sensor_id in sensor_ids]
            self._sensor_types_to_names[sensor_types] = names
        return names

    physics_class._get_sensor_names = _get_sensor_names
    physics_class._sb3_pref_isin_patch = True


def parse_dmcontrol_name(name: str) -> tuple[str, str]:
    """
    Split a B-Pref style ``domain_task`` name into a dm_control ``(domain, task)`` pair.

    Domains and tasks both contain underscores (``ball_in_cup_catch``, ``point_mass_easy``), so
    every split point is tried from the left and the first one that names a suite task wins.

    :param name: e.g. ``"walker_walk"``, optionally prefixed with ``dmc_`` or ``dm_control/``, or the id in
        gymnasium's form, ``"sb3_pref/dmc-walker-walk-v0"``
    :return: ``(domain_name, task_name)``
    :raises ValueError: if no split names a task of ``dm_control.suite.ALL_TASKS``; it names the closest tasks
    """
    all_tasks = set(_suite().ALL_TASKS)
    # The id in gymnasium's form separates domain and task with a dash, which neither name contains.
    namespaced = _GYM_ID.fullmatch(name)
    if namespaced and (namespaced["domain"], namespaced["task"]) in all_tasks:
        return namespaced["domain"], namespaced["task"]
    stripped = name
    for prefix in _PREFIXES:
        if stripped.startswith(prefix):
            stripped = stripped[len(prefix) :]
            break
    for index, char in enumerate(stripped):
        if char == "_" and (stripped[:index], stripped[index + 1 :]) in all_tasks:
            return stripped[:index], stripped[index + 1 :]
    # Suggested in the form the name was given in.
    form = dmc_gym_id if namespaced or name.startswith(f"{NAMESPACE}/") else "{}_{}".format
    close = difflib.get_close_matches(name, [form(*pair) for pair in sorted(all_tasks)], n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise ValueError(
        f"Unknown dm_control task {name!r}: expected 'domain_task' such as {_EXAMPLES}, or the id in gymnasium's "
        f"form, {dmc_gym_id('walker', 'walk')!r} (all {len(all_tasks)} pairs are listed in "
        f"dm_control.suite.ALL_TASKS).{hint}"
    )


def _episode_end_flags(time_step: Any) -> tuple[bool, bool]:
    """
    Map a dm_control time step to gymnasium's ``(terminated, truncated)``.

    dm_control marks every episode end with ``last()``; a discount of 0 means a true terminal
    state, anything else is the time limit, which must be bootstrapped (so ``truncated``).
    """
    if not time_step.last():
        return False, False
    terminated = time_step.discount is not None and float(time_step.discount) == 0.0
    return terminated, not terminated


class DMCEnv(gym.Env[np.ndarray, np.ndarray]):
    """
    A dm_control suite task behind the gymnasium API.

    Observations are the task's observation arrays flattened and concatenated in dm_control's
    order (float32); actions live in ``[-1, 1]`` and are rescaled linearly to the actuator bounds.
    An episode ends with ``truncated=True`` at the task's time limit (1000 steps for the B-Pref
    tasks) and with ``terminated=True`` only if dm_control reports a terminal state (discount 0).

    :param domain_name: dm_control domain, e.g. ``"walker"``
    :param task_name: dm_control task, e.g. ``"walk"``
    :param seed: seed of the task's random state (initial states); ``reset(seed=...)`` reseeds it
    :param task_kwargs: extra keyword arguments for the task (``random`` is set from ``seed``)
    :param environment_kwargs: keyword arguments for ``control.Environment`` (e.g. ``time_limit``)
    :param render_mode: ``None`` or ``"rgb_array"``
    :param width: width of rendered frames in pixels
    :param height: height of rendered frames in pixels
    :param camera_id: the MuJoCo camera to render from
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 40}

    def __init__(
        self,
        domain_name: str,
        task_name: str,
        seed: Optional[int] = None,
        task_kwargs: Optional[dict[str, Any]] = None,
        environment_kwargs: Optional[dict[str, Any]] = None,
        render_mode: Optional[str] = None,
        width: int = 320,
        height: int = 240,
        camera_id: int = 0,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}.")
        task_kwargs = dict(task_kwargs or {})
        if seed is not None:
            task_kwargs["random"] = seed
        self._env = _suite().load(domain_name, task_name, task_kwargs=task_kwargs, environment_kwargs=environment_kwargs)
        self.domain_name, self.task_name = domain_name, task_name
        self.render_mode = render_mode
        self.width, self.height, self.camera_id = width, height, camera_id
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self._env.control_timestep())}

        action_spec = self._env.action_spec()
        self._action_low = np.asarray(action_spec.minimum, dtype=np.float64)
        self._action_high = np.asarray(action_spec.maximum, dtype=np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, shape=action_spec.shape, dtype=np.float32)
        obs_dim = sum(int(np.prod(spec.shape)) for spec in self._env.observation_spec().values())
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float32)
        self._needs_reset = True
        self._closed = False
        # Made without gym.make (a factory, make_vec_env with the class) the env still says what it is: the spec
        # of its id in gymnasium's form with these arguments. gym.make replaces it with the spec of the id it made.
        step_limit = self._env._step_limit
        self.spec = EnvSpec(
            id=dmc_gym_id(domain_name, task_name),
            entry_point="sb3_pref.envs.dmc:DMCEnv",
            kwargs=dict(domain_name=domain_name, task_name=task_name, seed=seed, task_kwargs=task_kwargs or None,
                        environment_kwargs=environment_kwargs, render_mode=render_mode, width=width, height=height,
                        camera_id=camera_id),
            max_episode_steps=None if step_limit == float("inf") else int(step_limit),
        )  # fmt: skip

    @property
    def physics(self) -> Any:
        """The dm_control ``Physics`` of the task (for rendering or inspection)."""
        return self._env.physics

    @property
    def dm_env(self) -> Any:
        """The wrapped ``dm_control.rl.control.Environment``."""
        return self._env

    def rescale_action(self, action: np.ndarray) -> np.ndarray:
        """
        Map an action from ``[-1, 1]`` to the actuator bounds of the task (clipping first).

        :param action: action in the normalised space
        :return: the action dm_control receives, float64
        """
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        return self._action_low + (action + 1.0) * 0.5 * (self._action_high - self._action_low)

    @staticmethod
    def _flatten(observation: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray(value, dtype=np.float32).ravel() for value in observation.values()])

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            # Reseeding in place equals a fresh RandomState(seed), without reloading the model.
            self._env.task.random.seed(seed)
        time_step = self._env.reset()
        self._needs_reset = False
        return self._flatten(time_step.observation), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._needs_reset:
            # dm_control would silently start a new episode here, hiding a missing reset.
            raise RuntimeError("DMCEnv.step() called before reset() or after the episode ended.")
        time_step = self._env.step(self.rescale_action(action))
        terminated, truncated = _episode_end_flags(time_step)
        self._needs_reset = terminated or truncated
        reward = 0.0 if time_step.reward is None else float(time_step.reward)
        info = {"discount": float(time_step.discount)}
        return self._flatten(time_step.observation), reward, terminated, truncated, info

    def render(self) -> Optional[np.ndarray]:
        if self.render_mode is None:
            gym.logger.warn("DMCEnv.render() needs render_mode='rgb_array' at construction.")
            return None
        return self._env.physics.render(height=self.height, width=self.width, camera_id=self.camera_id)

    def get_state(self) -> np.ndarray:
        """
        :return: a copy of the physics state (qpos, qvel, act), enough to re-render a frame
        """
        return np.array(self._env.physics.get_state(), copy=True)

    def set_state(self, state: np.ndarray) -> None:
        """
        Restore a physics state from ``get_state()`` (the episode's step counter is unchanged).

        :param state: the flat physics state
        """
        self._env.physics.set_state(np.asarray(state, dtype=np.float64))
        # Positions of bodies, sites and cameras are derived quantities: recompute them for rendering.
        self._env.physics.forward()

    def close(self) -> None:
        # Release rendering contexts now: left to interpreter shutdown they log spurious errors.
        if not self._closed:
            self._env.physics.free()
            self._closed = True


def make_dmcontrol_env(name: str, seed: Optional[int] = 0, **kwargs: Any) -> DMCEnv:
    """
    Create a dm_control task from its B-Pref name.

    :param name: ``domain_task``, e.g. ``"walker_walk"`` or ``"ball_in_cup_catch"``
    :param seed: seed of the task's random state
    :param kwargs: passed to ``DMCEnv`` (``render_mode``, ``width``, ``height``, ``camera_id``...)
    :return: the environment
    """
    domain_name, task_name = parse_dmcontrol_name(name)
    return DMCEnv(domain_name, task_name, seed=seed, **kwargs)


def make_vec_dmcontrol_env(
    name: str,
    n_envs: int = 1,
    seed: Optional[int] = 0,
    monitor_dir: Optional[str] = None,
    vec_env_cls: Optional[VecEnvClass] = None,
    vec_env_kwargs: Optional[dict[str, Any]] = None,
    monitor_kwargs: Optional[dict[str, Any]] = None,
    wrapper_class: Optional[Callable[[gym.Env], gym.Env]] = None,
    wrapper_kwargs: Optional[dict[str, Any]] = None,
    env_kwargs: Optional[dict[str, Any]] = None,
) -> VecEnv:
    """
    Create ``n_envs`` monitored copies of a dm_control task; env ``i`` is seeded with ``seed + i``.

    :param name: ``domain_task``, e.g. ``"walker_walk"``
    :param n_envs: number of environments
    :param seed: base seed (``None``: unseeded)
    :param monitor_dir: folder for the ``Monitor`` CSV files, ``None`` for no files
    :param vec_env_cls: ``DummyVecEnv`` (default) or ``SubprocVecEnv``
    :param vec_env_kwargs: keyword arguments for the VecEnv class
    :param monitor_kwargs: keyword arguments for ``Monitor``
    :param wrapper_class: an extra wrapper applied after ``Monitor``
    :param wrapper_kwargs: keyword arguments for ``wrapper_class``
    :param env_kwargs: keyword arguments for ``DMCEnv`` (``render_mode``, ``environment_kwargs``...)
    :return: the VecEnv
    """
    # Parsed here so that a bad name fails in the caller, not in n_envs worker processes.
    domain_name, task_name = parse_dmcontrol_name(name)
    kwargs = {**(env_kwargs or {}), "domain_name": domain_name, "task_name": task_name, "seed": seed}
    # Every copy gets the same kwargs; SB3 then resets env i with seed + i, which these envs
    # treat as a full reseed, so env i behaves exactly like a single env created with seed + i.
    return make_vec_env(
        DMCEnv,
        n_envs=n_envs,
        env_kwargs=kwargs,
        seed=seed,
        monitor_dir=monitor_dir,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs=monitor_kwargs,
        wrapper_class=wrapper_class,
        wrapper_kwargs=wrapper_kwargs,
    )
