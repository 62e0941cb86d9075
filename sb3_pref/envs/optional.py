"""
What the dm_control and Meta-World factories share below the dispatch between them: optional imports with an
actionable error and a headless OpenGL default. Kept apart from :mod:`sb3_pref.envs.factory`, which imports
those factories, so that they can use these without importing it back.
"""

import ctypes.util
import importlib
import os
import sys
from importlib import metadata
from types import ModuleType
from typing import Union

from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

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


__all__ = ["VecEnvClass", "import_optional", "install_hint", "select_headless_gl_backend"]
