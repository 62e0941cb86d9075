"""
Helpers shared by the dm_control and Meta-World factories: optional imports with an actionable
error, a headless OpenGL default, and one ``make_vec_env`` call that both benchmarks go through.
"""

import ctypes.util
import importlib
import os
import sys
from types import ModuleType
from typing import Any, Callable, Optional, Union

import gymnasium as gym
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

VecEnvClass = type[Union[DummyVecEnv, SubprocVecEnv]]

_gl_checked = False


def select_headless_gl_backend() -> None:
    """
    Point MuJoCo at OSMesa when nothing else can render: on Linux, with no display, no
    ``MUJOCO_GL`` set by the user and ``libOSMesa`` installed.

    dm_control fixes its OpenGL backend once, when it is first imported, and its automatic choice
    (GLFW) imports fine on a headless machine but fails at the first ``render()``. Setting the
    variable before that import makes ``render_mode="rgb_array"`` work out of the box on servers;
    an explicit ``MUJOCO_GL`` (e.g. ``egl`` on a GPU node) is always respected.
    """
    global _gl_checked
    if _gl_checked:
        return
    _gl_checked = True
    if "MUJOCO_GL" in os.environ or not sys.platform.startswith("linux"):
        return
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    # Forcing a backend whose library is missing would break even non-rendering use of dm_control.
    if ctypes.util.find_library("OSMesa") is not None:
        os.environ["MUJOCO_GL"] = "osmesa"


def import_optional(module: str, extra: str) -> ModuleType:
    """
    Import a dependency that only one family of environments needs.

    :param module: the module to import, e.g. ``"dm_control.suite"``
    :param extra: the ``sb3_pref`` extra that installs it, e.g. ``"dmc"``
    :return: the imported module
    :raises ImportError: naming the extra to install when the package itself is missing
    """
    select_headless_gl_backend()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        # Only rewrite the message when the package itself is absent, not one of its own imports.
        if error.name is None or module.split(".")[0] != error.name.split(".")[0]:
            raise
        raise ImportError(
            f"{module} is not installed: install it with `pip install sb3_pref[{extra}]` "
            f"(or `pip install 'sb3_pref[all]'`) to use these environments."
        ) from error


def make_monitored_vec_env(
    env_class: Callable[..., gym.Env],
    env_kwargs: dict[str, Any],
    n_envs: int = 1,
    seed: Optional[int] = 0,
    monitor_dir: Optional[str] = None,
    vec_env_cls: Optional[VecEnvClass] = None,
    vec_env_kwargs: Optional[dict[str, Any]] = None,
    monitor_kwargs: Optional[dict[str, Any]] = None,
    wrapper_class: Optional[Callable[[gym.Env], gym.Env]] = None,
    wrapper_kwargs: Optional[dict[str, Any]] = None,
) -> VecEnv:
    """
    Build ``n_envs`` monitored copies of ``env_class(**env_kwargs)`` with SB3's ``make_vec_env``.

    Every copy is built with ``env_kwargs`` unchanged (``make_vec_env`` does not pass the rank to
    the constructor); SB3 then resets env ``i`` with ``seed + i``, which our envs treat as a full
    reseed, so env ``i`` behaves exactly like a single env created with ``seed + i``.
    ``env_class`` must be importable by name so that ``SubprocVecEnv`` can pickle it.

    :param env_class: the env class (or module-level function) to instantiate
    :param env_kwargs: keyword arguments for ``env_class``
    :param n_envs: number of environments
    :param seed: base seed; env ``i`` is reset with ``seed + i`` (``None``: unseeded)
    :param monitor_dir: folder for the ``Monitor`` CSV files, ``None`` for no files
    :param vec_env_cls: ``DummyVecEnv`` (default) or ``SubprocVecEnv``
    :param vec_env_kwargs: keyword arguments for the VecEnv class (e.g. ``start_method``)
    :param monitor_kwargs: keyword arguments for ``Monitor``
    :param wrapper_class: an extra wrapper applied after ``Monitor``
    :param wrapper_kwargs: keyword arguments for ``wrapper_class``
    :return: the VecEnv
    """
    return make_vec_env(
        env_class,
        n_envs=n_envs,
        seed=seed,
        monitor_dir=monitor_dir,
        env_kwargs=env_kwargs,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs=monitor_kwargs,
        wrapper_class=wrapper_class,
        wrapper_kwargs=wrapper_kwargs,
    )


def make_benchmark_vec_env(name: str, n_envs: int = 1, seed: Optional[int] = 0, **kwargs: Any) -> VecEnv:
    """
    Dispatch a B-Pref style name to the matching factory, like B-Pref's ``metaworld_flag``:
    ``metaworld_*`` / ``*-v2`` / ``*-v3`` names go to Meta-World, everything else to dm_control.

    :param name: e.g. ``"walker_walk"`` or ``"metaworld_button-press-topdown-v2"``
    :param n_envs: number of environments
    :param seed: base seed, env ``i`` uses ``seed + i``
    :param kwargs: passed on to ``make_vec_metaworld_env`` or ``make_vec_dmcontrol_env``
    :return: the VecEnv
    """
    # Imported here because both modules import this one.
    from sb3_pref.envs.dmc import make_vec_dmcontrol_env
    from sb3_pref.envs.metaworld import is_metaworld_env_name, make_vec_metaworld_env

    if is_metaworld_env_name(name):
        return make_vec_metaworld_env(name, n_envs=n_envs, seed=seed, **kwargs)
    return make_vec_dmcontrol_env(name, n_envs=n_envs, seed=seed, **kwargs)
