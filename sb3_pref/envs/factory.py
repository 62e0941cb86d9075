"""
Helpers shared by the dm_control and Meta-World factories: optional imports with an actionable
error, a headless OpenGL default, and the name-based dispatch between them and gymnasium's own tasks.
"""

import ctypes.util
import importlib
import os
import re
import sys
from importlib import metadata
from types import ModuleType
from typing import Any, Optional, Union

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


def install_hint(extra: str) -> str:
    """
    How to install an extra of sb3_pref. sb3_pref is not on PyPI yet, so ``pip install sb3_pref[extra]``
    fails: the hint names the install from a checkout and, where sb3_pref's metadata is installed, the
    extra's own packages, which install anywhere.

    :param extra: an extra of sb3_pref, e.g. ``"dmc"``
    :return: e.g. ``pip install -e '.[dmc]' in a checkout of sb3-pref, or pip install 'dm-control==1.0.28' 'mujoco==3.3.0'``
    """
    hint = f"pip install -e '.[{extra}]' in a checkout of sb3-pref"
    try:
        from packaging.requirements import Requirement

        lines = metadata.requires("sb3_pref") or []
    except (ImportError, metadata.PackageNotFoundError):  # run from a source tree that was never installed
        return hint
    packages = []
    for line in lines:
        requirement = Requirement(line)
        marker, requirement.marker = requirement.marker, None
        # The extra's own lines: their marker holds for this extra and not without one.
        if marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}):
            packages.append(f"'{requirement}'")
    return f"{hint}, or pip install {' '.join(packages)}" if packages else hint


def import_optional(module: str, extra: str) -> ModuleType:
    """
    Import a dependency that only one family of environments needs.

    :param module: the module to import, e.g. ``"dm_control.suite"``
    :param extra: the ``sb3_pref`` extra that installs it, e.g. ``"dmc"``
    :return: the imported module
    :raises ImportError: naming an install that works when the package itself is missing
    """
    select_headless_gl_backend()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        # Only rewrite the message when the package itself is absent, not one of its own imports.
        if error.name is None or module.split(".")[0] != error.name.split(".")[0]:
            raise
        raise ImportError(f"{module} is not installed, and these environments need it: {install_hint(extra)}") from error


# gymnasium's id format, ``[namespace/]Name-vN`` (Meta-World's -v2 / -v3 names are told apart first).
_GYMNASIUM_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")


def is_gymnasium_env_name(name: str) -> bool:
    """
    Whether a benchmark name is a task of gymnasium's own registry (``"Pendulum-v1"``), rather than a
    dm_control ``domain_task`` or a Meta-World name.

    :param name: a task name
    :return: True for a versioned id that gymnasium has registered
    """
    from sb3_pref.envs.metaworld import is_metaworld_env_name

    if is_metaworld_env_name(name) or not _GYMNASIUM_ID.match(name):
        return False
    import gymnasium

    return name in gymnasium.registry


def gymnasium_episode_length(name: str) -> int:
    """
    :param name: a registered gymnasium id
    :return: its ``max_episode_steps``
    :raises ValueError: for a task without a time limit (segments and episodes need one)
    """
    import gymnasium

    steps = gymnasium.spec(name).max_episode_steps
    if steps is None:
        raise ValueError(f"{name} has no max_episode_steps: register it with a time limit to learn from its segments")
    return int(steps)


def make_benchmark_vec_env(name: str, n_envs: int = 1, seed: Optional[int] = 0, **kwargs: Any) -> VecEnv:
    """
    Dispatch a B-Pref style name to the matching factory, like B-Pref's ``metaworld_flag``:
    ``metaworld_*`` / ``*-v2`` / ``*-v3`` names go to Meta-World, other gymnasium ids (``Pendulum-v1``)
    to SB3's ``make_vec_env``, everything else to dm_control.

    :param name: e.g. ``"walker_walk"``, ``"metaworld_button-press-topdown-v2"`` or ``"Pendulum-v1"``
    :param n_envs: number of environments
    :param seed: base seed, env ``i`` uses ``seed + i``
    :param kwargs: passed on to ``make_vec_metaworld_env``, ``make_vec_dmcontrol_env`` or, for a
        gymnasium id, SB3's ``make_vec_env`` (e.g. ``monitor_dir``)
    :return: the VecEnv
    """
    # Imported here because both modules import this one.
    from sb3_pref.envs.dmc import make_vec_dmcontrol_env
    from sb3_pref.envs.metaworld import is_metaworld_env_name, make_vec_metaworld_env

    if is_metaworld_env_name(name):
        return make_vec_metaworld_env(name, n_envs=n_envs, seed=seed, **kwargs)
    if is_gymnasium_env_name(name):
        from stable_baselines3.common.env_util import make_vec_env

        return make_vec_env(name, n_envs=n_envs, seed=seed, **kwargs)
    return make_vec_dmcontrol_env(name, n_envs=n_envs, seed=seed, **kwargs)
