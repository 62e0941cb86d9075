"""
Checks, at import of :mod:`sb3_pref.envs`, that dm-control, Meta-World and the installed MuJoCo fit together.

pip only re-resolves what it is asked to install, so two things break the stack silently:

- a MuJoCo that an installed package does not accept: adding Meta-World (which pins MuJoCo 3.3.0) after a
  newer dm-control downgrades MuJoCo under it, and ``pip install -U dm-control`` upgrades MuJoCo past
  Meta-World's pin; the env then fails deep inside MuJoCo (``'MjModel' object has no attribute ...``);
- a broken MuJoCo: MuJoCo 4 ships as three distributions (``mujoco``, ``mujoco-core``, ``mujoco-studio``)
  sharing one ``mujoco`` folder. Upgrading from 3.x deletes files that ``mujoco-core`` had just written, and
  downgrading to 3.x leaves ``mujoco-core`` and ``mujoco-studio`` behind; either way ``import mujoco`` fails.

Reading the installed packages' metadata catches both without importing MuJoCo, and the warning prints the
command that repairs them.
"""

import os
import warnings
from collections.abc import Iterable
from importlib import metadata
from typing import Optional

#: the pair that ``sb3_pref[dmc]`` and ``sb3_pref[metaworld]`` both install (kept in step with setup.py)
TESTED_PINS = ("dm-control==1.0.28", "mujoco==3.3.0")
CHECKED_DISTRIBUTIONS = ("dm-control", "metaworld")
#: MuJoCo 4's distributions; from 4.0 on, ``mujoco`` itself holds only the Python wrapper
MUJOCO_DISTRIBUTIONS = ("mujoco", "mujoco-core", "mujoco-studio")
_COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


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


def find_mujoco_leftovers(mujoco_version: Optional[str], parts: dict[str, str]) -> list[str]:
    """
    :param mujoco_version: the installed ``mujoco`` version (None: not installed, nothing to check)
    :param parts: ``{distribution: version}`` of the installed ``mujoco-core`` / ``mujoco-studio``
    :return: one sentence per part that does not belong to the installed ``mujoco``
    """
    if mujoco_version is None:
        return []
    return [
        f"{part} {version} is installed beside mujoco {mujoco_version}, so import mujoco fails"
        for part, version in parts.items()
        if version != mujoco_version
    ]


def find_missing_compiled_files(distribution: metadata.Distribution) -> list[str]:
    """
    :param distribution: an installed distribution
    :return: the compiled modules and libraries its RECORD lists that are no longer on disk
    """
    return [
        str(path)
        for path in distribution.files or []
        if (path.suffix in _COMPILED_SUFFIXES or ".so." in path.name) and not os.path.exists(path.locate())
    ]


def repair_command(installed: Iterable[str]) -> str:
    """
    The command that restores the tested pair. Uninstalling every MuJoCo distribution first is what makes
    it work from any state: a plain ``pip install "mujoco==3.3.0"`` over MuJoCo 4 keeps ``mujoco-core``.

    :param installed: the names of the installed distributions (dm-control is pinned only where installed)
    :return: a shell command line
    """
    pins = [pin for pin in TESTED_PINS if not pin.startswith("dm-control") or "dm-control" in installed]
    return f"pip uninstall -y {' '.join(MUJOCO_DISTRIBUTIONS)} && pip install " + " ".join(f'"{pin}"' for pin in pins)


def mismatch_message(clashes: list[str], versions: dict[str, Optional[str]]) -> str:
    """
    :param clashes: the sentences of :func:`find_mujoco_clashes`, :func:`find_mujoco_leftovers` and the missing-files check
    :param versions: ``{distribution: installed version or None}``, with at least dm-control and metaworld
    :return: the warning: what clashes, what it breaks, and the command that repairs it
    """
    sentences = ["MuJoCo mismatch: " + "; ".join(clashes)]
    # Name the pin that decides: over MuJoCo 4, dm-control is content and only Meta-World's pin is broken.
    if any(clash.startswith("metaworld ") for clash in clashes):
        sentences.append(
            f"Meta-World {versions.get('metaworld')} pins mujoco==3.3.0, the MuJoCo of dm-control 1.0.28; every later "
            "dm-control needs a newer one, so beside Meta-World dm-control stays at 1.0.28 (the pins of the dmc "
            "and metaworld extras of sb3_pref)"
        )
    if any(clash.startswith("dm-control ") for clash in clashes):
        sentences.append("The dm_control tasks will fail")
    installed = [name for name, version in versions.items() if version is not None]
    return ". ".join(sentences) + f". Fix: {repair_command(installed)}"


def check_mujoco_versions(warn: bool = True) -> list[str]:
    """
    Compare the installed dm-control and Meta-World with the installed MuJoCo, and check that MuJoCo
    itself is whole (no part of another MuJoCo release beside it, none of its compiled files deleted).

    :param warn: issue a ``UserWarning`` that says what breaks and the command that fixes it
    :return: the problems found, one sentence each (empty when the stack is consistent or MuJoCo is not installed)
    """
    versions = {name: _installed_version(name) for name in (*CHECKED_DISTRIBUTIONS, *MUJOCO_DISTRIBUTIONS)}
    requirements = {}
    for distribution in CHECKED_DISTRIBUTIONS:
        version = versions[distribution]
        if version is not None:
            requirements[distribution] = (version, metadata.requires(distribution) or [])
    mujoco_version = versions["mujoco"]
    clashes = find_mujoco_clashes(mujoco_version, requirements)
    parts = {name: version for name in MUJOCO_DISTRIBUTIONS[1:] if (version := versions[name]) is not None}
    clashes += find_mujoco_leftovers(mujoco_version, parts)
    # A leftover part has lost files to the release beside it: listing them too would only repeat the cause.
    if not any(" beside mujoco " in clash for clash in clashes):
        for name in MUJOCO_DISTRIBUTIONS:
            if versions[name] is not None and (missing := find_missing_compiled_files(metadata.distribution(name))):
                clashes.append(
                    f"{name} {versions[name]} lacks {len(missing)} of its compiled files ({missing[0]}, ...), "
                    "so import mujoco fails"
                )
    if clashes and warn:
        warnings.warn(mismatch_message(clashes, versions), UserWarning, stacklevel=2)
    return clashes
