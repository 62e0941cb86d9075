"""
Checks, at import of :mod:`sb3_pref.envs`, that dm-control and Meta-World accept the installed MuJoCo.

pip only re-resolves what it is asked to install: adding Meta-World (which pins MuJoCo 3.3.0) after a
newer dm-control silently downgrades MuJoCo under it, and dm-control then fails deep inside an env
(``'MjModel' object has no attribute ...``). Reading the installed packages' own requirements catches
this at import, with the command that fixes it.
"""

import warnings
from importlib import metadata
from typing import Optional

#: the pair that ``pip install sb3_pref[dmc,metaworld]`` installs (kept in step with setup.py)
TESTED_PINS = ("dm-control==1.0.28", "mujoco==3.3.0")
CHECKED_DISTRIBUTIONS = ("dm-control", "metaworld")


def _installed_version(distribution: str) -> Optional[str]:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def find_mujoco_clashes(mujoco_version: Optional[str], requirements: dict[str, tuple[str, list[str]]]) -> list[str]:
    """
    :param mujoco_version: the installed MuJoCo version (None: not installed, nothing to check)
    :param requirements: ``{distribution: (version, its Requires-Dist lines)}`` of the installed packages
    :return: one sentence per package whose MuJoCo requirement the installed MuJoCo breaks
    """
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging is an install requirement; without it the check is skipped, not the import
        return []
    if mujoco_version is None:
        return []
    try:
        installed = Version(mujoco_version)
    except InvalidVersion:
        return []
    clashes = []
    for distribution, (version, lines) in requirements.items():
        for line in lines:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.name.lower() != "mujoco" or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
                continue
            if not requirement.specifier.contains(installed, prereleases=True):
                clashes.append(f"{distribution} {version} needs {requirement} but mujoco {mujoco_version} is installed")
    return clashes


def check_mujoco_versions(warn: bool = True) -> list[str]:
    """
    Compare the installed dm-control and Meta-World with the installed MuJoCo.

    :param warn: issue a ``UserWarning`` that says how to fix a clash
    :return: the clashes found (empty when the stack is consistent or MuJoCo is not installed)
    """
    requirements = {}
    for distribution in CHECKED_DISTRIBUTIONS:
        version = _installed_version(distribution)
        if version is not None:
            requirements[distribution] = (version, metadata.requires(distribution) or [])
    clashes = find_mujoco_clashes(_installed_version("mujoco"), requirements)
    if clashes and warn:
        pins = " ".join(f'"{pin}"' for pin in TESTED_PINS)
        warnings.warn(
            "; ".join(clashes) + ". dm_control tasks will fail. Fix: pip install " + pins + " (the pair that "
            "sb3_pref[dmc] and sb3_pref[metaworld] both pin; every later dm-control needs a MuJoCo newer than "
            "Meta-World's pin).",
            UserWarning,
            stacklevel=2,
        )
    return clashes
