"""Gymnasium ids of the benchmark tasks (B-Pref's names) and the dm-control / MuJoCo version check."""

import importlib.util
import os

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import sb3_pref  # noqa: F401  (registers the ids)
from sb3_pref.envs.registration import DMC_TASKS, METAWORLD_TASKS, dmc_env_id, metaworld_env_id
from sb3_pref.envs.versions import check_mujoco_versions, find_mujoco_clashes

os.environ.setdefault("MUJOCO_GL", "osmesa")
needs_dmc = pytest.mark.skipif(importlib.util.find_spec("dm_control") is None, reason="pip install sb3_pref[dmc]")
needs_metaworld = pytest.mark.skipif(importlib.util.find_spec("metaworld") is None, reason="pip install sb3_pref[metaworld]")


@needs_dmc
def test_registered_dmc_ids_are_the_suite_tasks_and_make_the_same_env_as_the_factory():
    from dm_control import suite

    from sb3_pref.envs import make_dmcontrol_env

    assert sorted(DMC_TASKS) == sorted(suite.ALL_TASKS), "the written-out list drifted from dm_control's"
    assert all(dmc_env_id(*task) in gym.registry for task in DMC_TASKS)
    env = gym.make("walker_walk")
    reference = make_dmcontrol_env("walker_walk", seed=3)
    obs, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs, reference.reset(seed=3)[0])
    action = np.linspace(-1, 1, 6, dtype=np.float32)
    step, expected = env.step(action), reference.step(action)
    np.testing.assert_array_equal(step[0], expected[0])
    assert step[1] == expected[1] and env.spec.id == "walker_walk"
    # SB3's make_vec_env reaches the id as well.
    vec_env = make_vec_env("cheetah_run", n_envs=2, seed=0)
    assert vec_env.observation_space.shape == (17,) and vec_env.reset().shape == (2, 17)


@needs_metaworld
def test_registered_metaworld_ids_use_bpref_names():
    import metaworld.env_dict

    assert sorted(f"{task}-v3" for task in METAWORLD_TASKS) == sorted(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
    assert all(metaworld_env_id(task) in gym.registry for task in METAWORLD_TASKS)
    env = gym.make("metaworld_button-press-topdown-v2")
    first, _ = env.reset(seed=0)
    again, _ = env.reset(seed=0)
    other, _ = env.reset(seed=1)
    assert first.shape == (39,) and np.array_equal(first, again) and not np.array_equal(first, other)
    assert env.step(env.action_space.sample())[0].shape == (39,)


def test_registering_twice_changes_nothing():
    from sb3_pref.envs.registration import register_benchmark_envs

    before = dict(gym.registry)
    assert register_benchmark_envs() == []
    assert dict(gym.registry) == before


def test_version_check_names_the_clash_and_accepts_the_pinned_pair():
    # dm-control 1.0.50's requirement against Meta-World's MuJoCo: the clash of issue 16.
    clash = find_mujoco_clashes("3.3.0", {"dm-control": ("1.0.50", ["mujoco>=3.3.8", "numpy>=1.9.0"])})
    assert clash == ["dm-control 1.0.50 needs mujoco>=3.3.8 but mujoco 3.3.0 is installed"]
    pinned = {"dm-control": ("1.0.28", ["mujoco>=3.2.7"]), "metaworld": ("3.1.1", ["mujoco==3.3.0"])}
    assert find_mujoco_clashes("3.3.0", pinned) == []
    # Requirements behind an extra are not the package's own.
    assert find_mujoco_clashes("3.3.0", {"x": ("1", ['mujoco>=4; extra == "gpu"'])}) == []
    assert find_mujoco_clashes(None, {"dm-control": ("1.0.50", ["mujoco>=3.3.8"])}) == []
    # This environment was installed from our extras: no clash.
    assert check_mujoco_versions(warn=False) == []


def test_setup_metadata_extras_and_license(monkeypatch):
    import runpy

    import setuptools
    from packaging.requirements import Requirement

    from sb3_pref.envs.versions import TESTED_PINS

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.chdir(repo)
    runpy.run_path(os.path.join(repo, "setup.py"))
    extras = {name: [Requirement(line) for line in lines] for name, lines in captured["extras_require"].items()}
    # pygame-ce, the fork gymnasium and SB3 use: both installed would overwrite each other's files.
    human = {requirement.name for requirement in extras["human"]}
    assert "pygame-ce" in human and "pygame" not in {r.name for lines in extras.values() for r in lines}
    # dmc and metaworld pin the same MuJoCo, and the import-time check names that pair.
    mujoco = {str(r) for name in ("dmc", "metaworld") for r in extras[name] if r.name == "mujoco"}
    assert mujoco == {"mujoco==3.3.0"} and set(TESTED_PINS) <= {str(r) for r in extras["dmc"]}
    with open(os.path.join(repo, "LICENSE")) as handle:
        assert handle.readline().strip() == f"{captured['license']} License"
    assert "License :: OSI Approved :: MIT License" in captured["classifiers"]
    python = "Programming Language :: Python :: 3."
    versions = {c.rsplit(" :: ", 1)[1] for c in captured["classifiers"] if c.startswith(python)}
    assert {"3.9", "3.11", "3.13"} <= versions and captured["python_requires"] == ">=3.9"
    assert captured["project_urls"] and "zoo/hyperparams/*.yml" in captured["package_data"]["sb3_pref"]
