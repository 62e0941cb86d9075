"""
Meta-World 3.x single tasks set up the way B-Pref trains on them.

Goal resampling: B-Pref builds the bare task class with ``_freeze_rand_vec = False`` so every
reset draws a fresh object/goal position from the task's continuous range. Meta-World 3.x keeps
that mode and adds ``seeded_rand_vec``, which draws from the env's own seeded ``np_random``
instead of the global NumPy RNG; we use both, so goals change at every reset and a seed fixes the
whole goal sequence. (``gym.make('Meta-World/MT1', ...)`` would instead cycle through 50
pre-sampled goals and ignores ``reset(seed=...)``.) The goal position is hidden from the
observation (zeros in ``obs[36:39]``) by default, as in B-Pref's Meta-World version.

Success: ``info["success"]`` is Meta-World's per-step flag; ``info["is_success"]`` is True from
the first successful step until the episode ends, so the last step of an episode (the only one
SB3 reads for ``rollout/success_rate``) says whether the episode succeeded at any step, which is
how B-Pref counts successes.
"""

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
from sb3_pref.envs.registration import metaworld_gym_id

_PREFIXES = ("metaworld_", "Meta-World/", "metaworld/", "sb3_pref/metaworld-")


def is_metaworld_env_name(name: str) -> bool:
    """
    Whether a name refers to a Meta-World task (B-Pref's ``metaworld_flag``), without importing it.

    :param name: e.g. ``"metaworld_button-press-topdown-v2"`` or ``"sweep-into-v3"``
    :return: True for ``metaworld_`` prefixed names and names ending in ``-v2`` / ``-v3``
    """
    return name.startswith(_PREFIXES) or name.endswith(("-v2", "-v3"))


def resolve_metaworld_name(name: str) -> str:
    """
    Map a B-Pref / Meta-World name to a Meta-World 3.x task name.

    :param name: ``metaworld_<task>-v2``, ``sb3_pref/metaworld-<task>-v3``, ``<task>-v2``, ``<task>-v3`` or ``<task>``
    :return: the ``-v3`` task name (v2 tasks were renamed v3 in Meta-World 3, same tasks)
    :raises ValueError: for unknown tasks or other versions
    """
    known = import_optional("metaworld.env_dict", "metaworld").ALL_V3_ENVIRONMENTS
    task = name
    for prefix in _PREFIXES:
        if task.startswith(prefix):
            task = task[len(prefix) :]
            break
    version = re.search(r"-v(\d+)$", task)
    if version is None:
        task = f"{task}-v3"
    elif version.group(1) == "2":
        task = f"{task[: version.start()]}-v3"
    if task not in known:
        close = difflib.get_close_matches(task, list(known), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"Unknown Meta-World task {name!r}: expected e.g. 'metaworld_button-press-topdown-v2', "
            f"'sweep-into-v3' (v2 and v3 names of the {len(known)} Meta-World 3 tasks).{hint}"
        )
    return task


class MetaWorldAdapter(gym.Wrapper):
    """
    Puts a bare Meta-World task in B-Pref's setting: a new seeded random goal at every reset,
    float32 observations, truncation after ``max_episode_steps`` and an episode-level
    ``info["is_success"]``. ``reset(seed=...)`` reseeds the goal sampler.

    :param env: a bare ``SawyerXYZEnv`` task (not wrapped)
    :param seed: seed of the goal sampler (``None``: unseeded)
    :param goal_observable: put the goal position in ``obs[36:39]`` (B-Pref: hidden, zeros)
    :param max_episode_steps: episode length (Meta-World's default is 500)
    """

    def __init__(
        self, env: gym.Env, seed: Optional[int] = None, goal_observable: bool = False, max_episode_steps: int = 500
    ) -> None:
        super().__init__(env)
        base: Any = env.unwrapped
        base._set_task_called = True  # no task object: the goal comes from the sampler below
        base._freeze_rand_vec = False
        base.seeded_rand_vec = True
        base.max_path_length = max_episode_steps
        if base._partially_observable == goal_observable:
            base._partially_observable = not goal_observable
            # The observation bounds are a cached property that depends on goal visibility.
            del base.sawyer_observation_space
        bounds = base.sawyer_observation_space
        self.observation_space = spaces.Box(bounds.low.astype(np.float32), bounds.high.astype(np.float32), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=env.action_space.shape, dtype=np.float32)
        if seed is not None:
            base.seed(seed)
        self._succeeded = False

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            # Meta-World's reset ignores its seed argument; seed() reseeds goals and spaces.
            self.env.unwrapped.seed(seed)  # type: ignore[attr-defined]
        self._succeeded = False
        obs, info = self.env.reset(options=options)
        return np.asarray(obs, dtype=np.float32), info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=np.float32))
        base: Any = self.env.unwrapped
        # After a simulation instability Meta-World stops reporting truncation: count steps ourselves.
        truncated = bool(truncated) or base.curr_path_length >= base.max_path_length
        self._succeeded = self._succeeded or bool(info.get("success", 0.0))
        info["is_success"] = self._succeeded
        return np.asarray(obs, dtype=np.float32), float(reward), bool(terminated), truncated, info

    def get_state(self) -> dict[str, np.ndarray]:
        """
        :return: the simulator state plus the sampled goal/object placement, enough to re-render
        """
        base: Any = self.env.unwrapped
        return {
            "qpos": base.data.qpos.copy(),
            "qvel": base.data.qvel.copy(),
            "mocap_pos": base.data.mocap_pos.copy(),
            "mocap_quat": base.data.mocap_quat.copy(),
            "rand_vec": np.array(base._last_rand_vec, copy=True),
        }

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """
        Restore a state from ``get_state()``, re-placing the goal and objects if they differ.
        Meant for re-rendering: the frame-stacked half of the next observation is not restored.

        :param state: a dict from ``get_state()``
        """
        mujoco = import_optional("mujoco", "metaworld")
        base: Any = self.env.unwrapped
        if not np.array_equal(base._last_rand_vec, state["rand_vec"]):
            # Objects and goal are placed by reset_model() from the frozen vector; keep the
            # sampler's RNG untouched so the goal sequence of later resets does not shift.
            rng_state = base.np_random.bit_generator.state
            base._last_rand_vec = np.array(state["rand_vec"], copy=True)
            base._freeze_rand_vec = True
            try:
                base.reset_model()
            finally:
                base._freeze_rand_vec = False
                base.np_random.bit_generator.state = rng_state
        base.data.qpos[:] = state["qpos"]
        base.data.qvel[:] = state["qvel"]
        base.data.mocap_pos[:] = state["mocap_pos"]
        base.data.mocap_quat[:] = state["mocap_quat"]
        mujoco.mj_forward(base.model, base.data)


def make_metaworld_env(
    name: str,
    seed: Optional[int] = 0,
    render_mode: Optional[str] = None,
    goal_observable: bool = False,
    max_episode_steps: int = 500,
    width: int = 320,
    height: int = 240,
    camera_name: Optional[str] = None,
    camera_id: Optional[int] = None,
    reward_function_version: str = "v2",
) -> MetaWorldAdapter:
    """
    Create a Meta-World task as B-Pref uses it (see the module docstring).

    :param name: e.g. ``"metaworld_button-press-topdown-v2"``, ``"button-press-topdown-v3"``
    :param seed: seed of the goal sampler (``None``: unseeded)
    :param render_mode: ``None``, ``"rgb_array"`` or ``"depth_array"`` (offscreen)
    :param goal_observable: put the goal position in the observation (B-Pref: hidden)
    :param max_episode_steps: episode length, truncated (not terminated) at the end
    :param width: width of rendered frames in pixels
    :param height: height of rendered frames in pixels
    :param camera_name: a named camera (``"corner"``, ``"topview"``...); the default free camera
        is upright, while in Meta-World 3.1.1 the ``corner*`` cameras render upside down
    :param camera_id: a camera index, alternative to ``camera_name``
    :param reward_function_version: Meta-World's ``"v2"`` (B-Pref's) or ``"v1"`` reward
    :return: the environment
    """
    task = resolve_metaworld_name(name)
    env_class = import_optional("metaworld.env_dict", "metaworld").ALL_V3_ENVIRONMENTS[task]
    env = env_class(
        render_mode=render_mode,
        camera_name=camera_name,
        camera_id=camera_id,
        reward_function_version=reward_function_version,
        width=width,
        height=height,
    )
    # Made without gym.make the env still says what it is (gym.make replaces this with the spec of the id it made).
    env.spec = EnvSpec(
        id=metaworld_gym_id(task.removesuffix("-v3")),
        entry_point="sb3_pref.envs.metaworld:make_metaworld_env",
        kwargs=dict(name=task, seed=seed, render_mode=render_mode, goal_observable=goal_observable,
                    max_episode_steps=max_episode_steps, width=width, height=height, camera_name=camera_name,
                    camera_id=camera_id, reward_function_version=reward_function_version),
        max_episode_steps=max_episode_steps,
    )  # fmt: skip
    return MetaWorldAdapter(env, seed=seed, goal_observable=goal_observable, max_episode_steps=max_episode_steps)


def make_vec_metaworld_env(
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
    Create ``n_envs`` monitored copies of a Meta-World task; env ``i`` is seeded with ``seed + i``.
    The ``Monitor`` CSV files get an ``is_success`` column unless ``monitor_kwargs`` says otherwise.

    :param name: e.g. ``"metaworld_button-press-topdown-v2"``
    :param n_envs: number of environments
    :param seed: base seed (``None``: unseeded)
    :param monitor_dir: folder for the ``Monitor`` CSV files, ``None`` for no files
    :param vec_env_cls: ``DummyVecEnv`` (default) or ``SubprocVecEnv``
    :param vec_env_kwargs: keyword arguments for the VecEnv class
    :param monitor_kwargs: keyword arguments for ``Monitor``
    :param wrapper_class: an extra wrapper applied after ``Monitor``
    :param wrapper_kwargs: keyword arguments for ``wrapper_class``
    :param env_kwargs: keyword arguments for ``make_metaworld_env`` (``render_mode``...)
    :return: the VecEnv
    """
    # Resolved here so that a bad name fails in the caller, not in n_envs worker processes.
    kwargs = {**(env_kwargs or {}), "name": resolve_metaworld_name(name), "seed": seed}
    # Every copy gets the same kwargs; SB3 then resets env i with seed + i, which these envs
    # treat as a full reseed, so env i behaves exactly like a single env created with seed + i.
    return make_vec_env(
        make_metaworld_env,
        n_envs=n_envs,
        env_kwargs=kwargs,
        seed=seed,
        monitor_dir=monitor_dir,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs={"info_keywords": ("is_success",)} if monitor_kwargs is None else monitor_kwargs,
        wrapper_class=wrapper_class,
        wrapper_kwargs=wrapper_kwargs,
    )
