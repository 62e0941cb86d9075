"""Gymnasium ids of the benchmark tasks (B-Pref's names) and the dm-control / MuJoCo version check."""

import importlib.metadata
import importlib.util
import os

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import sb3_pref  # noqa: F401  (registers the ids)
from sb3_pref.envs.registration import DMC_TASKS, METAWORLD_TASKS, dmc_env_id, dmc_gym_id, metaworld_env_id, metaworld_gym_id
from sb3_pref.envs.versions import (
    check_mujoco_versions,
    find_missing_compiled_files,
    find_mujoco_clashes,
    find_mujoco_leftovers,
    mismatch_message,
    repair_command,
)

os.environ.setdefault("MUJOCO_GL", "osmesa")
needs_dmc = pytest.mark.skipif(importlib.util.find_spec("dm_control") is None, reason="pip install -e '.[dmc]'")
needs_metaworld = pytest.mark.skipif(importlib.util.find_spec("metaworld") is None, reason="pip install -e '.[metaworld]'")


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


def test_every_task_has_an_id_in_gymnasiums_form():
    """Issue 45: ids with a namespace and a version, named for what they build; B-Pref's names stay as aliases."""
    from gymnasium.envs.registration import parse_env_id

    ids = [dmc_gym_id(*task) for task in DMC_TASKS] + [metaworld_gym_id(task) for task in METAWORLD_TASKS]
    assert len(set(ids)) == len(DMC_TASKS) + len(METAWORLD_TASKS) and all(env_id in gym.registry for env_id in ids)
    assert parse_env_id("sb3_pref/dmc-ball_in_cup-catch-v0") == ("sb3_pref", "dmc-ball_in_cup-catch", 0)
    # Meta-World 3 builds the -v3 tasks, whatever B-Pref's alias says
    assert parse_env_id(metaworld_gym_id("sweep-into")) == ("sb3_pref", "metaworld-sweep-into", 3)
    assert gym.spec(metaworld_gym_id("sweep-into")).kwargs["name"] == "sweep-into-v3"
    assert gym.spec(dmc_gym_id("walker", "walk")).max_episode_steps == 1000
    # dm_control's LQR runs forever; its namespaced id ends episodes after 1000 steps so that rollouts can use it
    assert gym.spec(dmc_gym_id("lqr", "lqr_2_1")).max_episode_steps == 1000


@needs_dmc
def test_namespaced_ids_and_factories_build_the_same_env_and_say_what_it_is():
    from sb3_pref.envs import make_dmcontrol_env, make_vec_dmcontrol_env

    namespaced, alias = gym.make("sb3_pref/dmc-cheetah-run-v0"), gym.make("cheetah_run")
    np.testing.assert_array_equal(namespaced.reset(seed=4)[0], alias.reset(seed=4)[0])
    assert namespaced.spec.id == "sb3_pref/dmc-cheetah-run-v0" and alias.spec.id == "cheetah_run"
    # made without gym.make, the env still has a spec (it was None): the namespaced id with the call's arguments
    made = make_dmcontrol_env("cartpole_swingup", seed=2)
    assert made.spec.id == "sb3_pref/dmc-cartpole-swingup-v0" and made.spec.max_episode_steps == 1000
    assert made.spec.kwargs["seed"] == 2
    rebuilt = gym.make(made.spec)
    np.testing.assert_array_equal(rebuilt.reset(seed=2)[0], made.reset(seed=2)[0])
    assert make_vec_dmcontrol_env("walker_stand", n_envs=2).get_attr("spec")[1].id == "sb3_pref/dmc-walker-stand-v0"
    assert make_dmcontrol_env("lqr_lqr_2_1").spec.max_episode_steps is None  # the factory keeps dm_control's own
    lqr = gym.make(dmc_gym_id("lqr", "lqr_2_1"))
    lqr.reset(seed=0)
    steps, ended = 0, (False, False)
    while not any(ended):  # zero force: the system stays away from the origin, so only the time limit ends it
        ended = lqr.step(np.zeros(lqr.action_space.shape, dtype=np.float32))[2:4]
        steps += 1
    assert steps == 1000 and ended == (False, True)


def test_factories_and_scripts_take_either_name_and_suggest_the_closest_one():
    from sb3_pref.envs import make_benchmark_vec_env, make_vec_dmcontrol_env, parse_dmcontrol_name, resolve_metaworld_name
    from sb3_pref.envs.factory import task_family

    # both names of a task reach the project's own factory, so they build the same env (not gymnasium's TimeLimit
    # around it for one of them)
    assert parse_dmcontrol_name("sb3_pref/dmc-ball_in_cup-catch-v0") == ("ball_in_cup", "catch")
    assert resolve_metaworld_name(metaworld_gym_id("sweep-into")) == "sweep-into-v3"
    assert task_family(dmc_gym_id("walker", "walk")) == "dmc" and task_family("Pendulum-v1") == "gym"
    by_id, by_alias = (
        make_benchmark_vec_env("sb3_pref/dmc-cartpole-balance-v0", seed=3),
        make_vec_dmcontrol_env("cartpole_balance", seed=3),
    )
    assert type(by_id.envs[0].unwrapped) is type(by_alias.envs[0].unwrapped) and by_id.envs[0].spec == by_alias.envs[0].spec
    np.testing.assert_array_equal(by_id.reset(), by_alias.reset())
    # a typo names the closest tasks, in the form it was written in
    with pytest.raises(ValueError, match="Did you mean cartpole_balance or"):
        parse_dmcontrol_name("cartpole_balanc")
    with pytest.raises(ValueError, match="Did you mean sb3_pref/dmc-cartpole-balance-v0 or"):
        parse_dmcontrol_name("sb3_pref/dmc-cartpole-balanc-v0")


def test_registered_ids_carry_the_episode_length():
    # gymnasium (TimeLimit), SB3 and RL Zoo read the episode length from the spec (issue 26: it was None).
    assert gym.spec("walker_walk").max_episode_steps == 1000
    assert gym.spec("lqr_lqr_2_1").max_episode_steps is None  # dm_control's LQR has no time limit
    assert gym.spec("metaworld_sweep-into-v2").max_episode_steps == 500


@needs_dmc
def test_registered_dmc_lengths_are_the_suite_step_limits():
    # The time limit and control timestep are set per domain: one task of each is enough.
    for domain in sorted({domain for domain, _ in DMC_TASKS}):
        task = next(task for other, task in DMC_TASKS if other == domain)
        env = gym.make(dmc_env_id(domain, task))
        step_limit = env.unwrapped.dm_env._step_limit  # dm_control's own: time limit / control timestep
        assert env.spec.max_episode_steps == (None if step_limit == float("inf") else step_limit), domain
        env.close()


@needs_dmc
def test_time_limit_and_dmc_end_an_episode_once_at_the_same_step():
    # gym.make adds a TimeLimit at step 1000, where the task truncates by itself; SB3's Monitor counts the steps.
    vec_env = make_vec_env("walker_walk", n_envs=1, seed=0)
    vec_env.reset()
    ends = []
    for step in range(1, 1301):
        _, _, dones, infos = vec_env.step(np.zeros((1, 6), dtype=np.float32))
        if dones[0]:
            ends.append((step, infos[0]["episode"]["l"], infos[0]["TimeLimit.truncated"]))
    assert ends == [(1000, 1000, True)]
    vec_env.close()


@needs_metaworld
def test_time_limit_and_metaworld_end_an_episode_once_at_step_500():
    env = gym.make("metaworld_button-press-topdown-v2")
    actions = np.random.default_rng(0).uniform(-1, 1, size=(500, 4)).astype(np.float32)
    for _ in range(2):  # the TimeLimit's count restarts with the episode
        env.reset(seed=0)
        flags = [tuple(env.step(action)[2:4]) for action in actions]
        assert flags[-1] == (False, True) and not any(any(flag) for flag in flags[:-1])


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


REPAIR = 'pip uninstall -y mujoco mujoco-core mujoco-studio && pip install "dm-control==1.0.28" "mujoco==3.3.0"'


def test_mujoco_4_beside_metaworld_names_metaworlds_pin_and_a_repair_that_removes_mujoco_4():
    # `pip install -U dm-control` beside Meta-World: dm-control 1.0.50 pulls MuJoCo 4 in three parts (issue 26).
    requirements = {"dm-control": ("1.0.50", ["mujoco>=3.17.0"]), "metaworld": ("3.1.1", ["mujoco==3.3.0"])}
    clashes = find_mujoco_clashes("4.0.0", requirements)
    assert clashes == ["metaworld 3.1.1 needs mujoco==3.3.0 but mujoco 4.0.0 is installed"]
    versions = {"dm-control": "1.0.50", "metaworld": "3.1.1", "mujoco": "4.0.0", "mujoco-core": "4.0.0"}
    message = mismatch_message(clashes, versions)
    assert message.startswith("MuJoCo mismatch: metaworld 3.1.1 needs mujoco==3.3.0 but mujoco 4.0.0 is installed. ")
    assert "Meta-World 3.1.1 pins mujoco==3.3.0" in message and "dm_control tasks will fail" not in message
    # A plain `pip install "mujoco==3.3.0"` keeps mujoco-core 4 and import mujoco fails: uninstall all parts first.
    assert message.endswith(f"Fix: {REPAIR}")


def test_mujoco_parts_left_by_a_downgrade_are_a_clash():
    # What the old fix left: mujoco 3.3.0 over MuJoCo 4's mujoco-core and mujoco-studio.
    leftovers = find_mujoco_leftovers("3.3.0", {"mujoco-core": "4.0.0", "mujoco-studio": "4.0.0"})
    assert leftovers == [
        "mujoco-core 4.0.0 is installed beside mujoco 3.3.0, so import mujoco fails",
        "mujoco-studio 4.0.0 is installed beside mujoco 3.3.0, so import mujoco fails",
    ]
    assert find_mujoco_leftovers("4.0.0", {"mujoco-core": "4.0.0", "mujoco-studio": "4.0.0"}) == []
    assert find_mujoco_leftovers(None, {"mujoco-core": "4.0.0"}) == []
    message = mismatch_message(leftovers, {"dm-control": "1.0.28", "metaworld": None, "mujoco": "3.3.0"})
    assert message.endswith(f"Fix: {REPAIR}") and "Meta-World" not in message


def test_dm_control_clash_message_and_a_repair_without_dm_control():
    clashes = find_mujoco_clashes("3.3.0", {"dm-control": ("1.0.50", ["mujoco>=3.17.0"])})
    message = mismatch_message(clashes, {"dm-control": "1.0.50", "metaworld": "3.1.1", "mujoco": "3.3.0"})
    assert "The dm_control tasks will fail" in message and "Meta-World 3.1.1 pins" not in message
    # Without dm-control installed, the repair installs no dm-control.
    assert repair_command(["metaworld", "mujoco"]) == REPAIR.replace('"dm-control==1.0.28" ', "")
    assert repair_command(["dm-control", "metaworld", "mujoco", "mujoco-core"]) == REPAIR


def test_missing_compiled_files_of_an_installed_distribution(tmp_path):
    # An upgrade from MuJoCo 3 to 4 deletes mujoco-core's freshly written bindings: its RECORD lists files that are gone.
    info = tmp_path / "mujoco_core-4.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mujoco-core\nVersion: 4.0.0\n")
    (info / "RECORD").write_text(
        "mujoco/__init__.py,,\nmujoco/_specs.cpython-311-x86_64-linux-gnu.so,,\nmujoco/libmujoco.so.4.0.0,,\n"
    )
    (tmp_path / "mujoco").mkdir()
    (tmp_path / "mujoco" / "__init__.py").write_text("")
    distribution = importlib.metadata.Distribution.at(info)
    assert find_missing_compiled_files(distribution) == [
        "mujoco/_specs.cpython-311-x86_64-linux-gnu.so",
        "mujoco/libmujoco.so.4.0.0",
    ]
    (tmp_path / "mujoco" / "_specs.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "mujoco" / "libmujoco.so.4.0.0").write_bytes(b"")
    assert find_missing_compiled_files(distribution) == []


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
        assert handle.readline().strip() == f"{captured['license_expression']} License"
    # The SPDX expression replaces the license classifier (deprecated, and refused by setuptools beside one).
    assert captured["license_files"] == ["LICENSE"] and not any(c.startswith("License ::") for c in captured["classifiers"])
    python = "Programming Language :: Python :: 3."
    versions = {c.rsplit(" :: ", 1)[1] for c in captured["classifiers"] if c.startswith(python)}
    assert {"3.9", "3.11", "3.13"} <= versions and captured["python_requires"] == ">=3.9"
    assert captured["project_urls"] and "zoo/hyperparams/*.yml" in captured["package_data"]["sb3_pref"]


def test_built_metadata_carries_the_spdx_license(setup_metadata):
    assert setup_metadata.metadata["License-Expression"] == "MIT"
    assert "LICENSE" in setup_metadata.metadata.get_all("License-File")
    assert not [c for c in setup_metadata.metadata.get_all("Classifier") if c.startswith("License ::")]


def test_pyproject_declares_the_build_backend_that_reads_the_license_expression():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "pyproject.toml"), "rb") as handle:
        build_system = tomllib.load(handle)["build-system"]
    assert build_system["build-backend"] == "setuptools.build_meta"
    (setuptools,) = [Requirement(line) for line in build_system["requires"] if Requirement(line).name == "setuptools"]
    # setuptools 77 is the first to write License-Expression (PEP 639).
    assert not setuptools.specifier.contains("76.1") and setuptools.specifier.contains("77.0")
