import ctypes.util
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import SubprocVecEnv

from sb3_pref.envs import (
    DMCEnv,
    MetaWorldAdapter,
    is_metaworld_env_name,
    make_benchmark_vec_env,
    make_dmcontrol_env,
    make_metaworld_env,
    make_vec_dmcontrol_env,
    make_vec_metaworld_env,
    parse_dmcontrol_name,
    resolve_metaworld_name,
)
from sb3_pref.envs.dmc import _episode_end_flags
from sb3_pref.envs.optional import import_optional, install_hint

pytest.importorskip("dm_control")
pytest.importorskip("metaworld")

MW_TASK = "button-press-topdown-v3"

# The envs pick OSMesa on headless Linux when it is installed; otherwise a display or a GPU is needed.
HAS_GL = bool(
    os.environ.get("DISPLAY")
    or os.environ.get("MUJOCO_GL") in ("egl", "glfw")
    or ctypes.util.find_library("OSMesa") is not None
)
needs_gl = pytest.mark.skipif(
    not HAS_GL, reason="no offscreen OpenGL backend: `apt-get install libosmesa6`, or MUJOCO_GL=egl on a GPU machine"
)


def run_episode(env: gym.Env, actions: np.ndarray) -> tuple[np.ndarray, list[bool], list[bool]]:
    """Play actions until the episode ends; returns the observations and the end flags."""
    observations, terminations, truncations = [env.reset()[0]], [], []
    for action in actions:
        obs, _, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        terminations.append(terminated)
        truncations.append(truncated)
        if terminated or truncated:
            break
    return np.array(observations), terminations, truncations


# ----------------------------------------------------------------------------- names


def test_dmcontrol_names() -> None:
    assert parse_dmcontrol_name("walker_walk") == ("walker", "walk")
    assert parse_dmcontrol_name("quadruped_walk") == ("quadruped", "walk")
    assert parse_dmcontrol_name("ball_in_cup_catch") == ("ball_in_cup", "catch")
    assert parse_dmcontrol_name("point_mass_easy") == ("point_mass", "easy")
    assert parse_dmcontrol_name("dmc_cheetah_run") == ("cheetah", "run")
    assert parse_dmcontrol_name("dm_control/walker_run") == ("walker", "run")
    for bad in ("walker_fly", "walker", "metaworld_reach-v3"):
        with pytest.raises(ValueError, match="walker_walk, quadruped_walk"):
            make_dmcontrol_env(bad)


def test_metaworld_names() -> None:
    assert is_metaworld_env_name("metaworld_button-press-topdown-v2")
    assert is_metaworld_env_name("sweep-into-v3")
    assert not is_metaworld_env_name("walker_walk")
    assert resolve_metaworld_name("metaworld_button-press-topdown-v2") == MW_TASK
    assert resolve_metaworld_name("button-press-topdown") == MW_TASK
    assert resolve_metaworld_name("metaworld_sweep-into-v3") == "sweep-into-v3"
    with pytest.raises(ValueError, match="Did you mean button-press-topdown-v3"):
        make_metaworld_env("button-press-topdwn-v2")
    with pytest.raises(ValueError, match="Unknown Meta-World task"):
        resolve_metaworld_name("button-press-topdown-v1")


def test_optional_imports() -> None:
    # sb3_pref is not on PyPI: the hint names the install from a checkout and the extra's own packages (issue 26).
    with pytest.raises(ImportError) as error:
        import_optional("sb3_pref_missing_package.suite", "dmc")
    assert str(error.value) == (
        "sb3_pref_missing_package.suite is not installed, and these environments need it: pip install -e '.[dmc]' "
        "in a checkout of sb3-pref, or pip install 'dm-control==1.0.28' 'mujoco==3.3.0' 'tqdm' 'rich'"
    )  # the extra's packages: the envs' and SB3's progress bar (learn(progress_bar=True))
    assert install_hint("no-such-extra") == "pip install -e '.[no-such-extra]' in a checkout of sb3-pref"
    # dm_control and Meta-World are only imported when an env is created.
    code = "import sys, sb3_pref.envs; print(sorted({'dm_control', 'metaworld', 'mujoco'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- dm_control


def test_dmc_spaces_and_action_rescaling() -> None:
    env = make_dmcontrol_env("walker_walk", seed=0)
    assert isinstance(env, DMCEnv) and (env.domain_name, env.task_name) == ("walker", "walk")
    assert env.observation_space.shape == (24,) and env.observation_space.dtype == np.float32
    assert env.action_space.shape == (6,) and env.action_space.dtype == np.float32
    np.testing.assert_array_equal(env.action_space.low, -1.0)
    np.testing.assert_array_equal(env.action_space.high, 1.0)
    obs, info = env.reset()
    assert obs.shape == (24,) and obs.dtype == np.float32 and info == {}
    # Quadruped's actuators are not [-1, 1]: check the mapping to the spec bounds.
    quadruped = make_dmcontrol_env("quadruped_walk", seed=0)
    spec = quadruped.dm_env.action_spec()
    assert quadruped.observation_space.shape == (78,)
    np.testing.assert_allclose(quadruped.rescale_action(-np.ones(12)), spec.minimum)
    np.testing.assert_allclose(quadruped.rescale_action(np.ones(12)), spec.maximum)
    np.testing.assert_allclose(quadruped.rescale_action(np.zeros(12))[:3], [0.0, 0.05, 0.0])
    np.testing.assert_allclose(quadruped.rescale_action(np.full(12, 3.0)), spec.maximum)  # clipped first


def test_dmc_episode_is_1000_steps_and_truncated() -> None:
    env = make_dmcontrol_env("walker_walk", seed=0)
    env.reset()
    rewards, flags = [], []
    for _ in range(1000):
        _, reward, terminated, truncated, info = env.step(np.zeros(6, dtype=np.float32))
        rewards.append(reward)
        flags.append((terminated, truncated))
    assert flags[-1] == (False, True) and info["discount"] == 1.0
    assert all(flag == (False, False) for flag in flags[:-1])
    assert all(isinstance(reward, float) and 0.0 <= reward <= 1.0 for reward in rewards)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(np.zeros(6))


def test_dmc_end_flags_follow_discount() -> None:
    dm_env = pytest.importorskip("dm_env")
    observation = {"x": np.zeros(1)}
    assert _episode_end_flags(dm_env.termination(1.0, observation)) == (True, False)
    assert _episode_end_flags(dm_env.truncation(1.0, observation)) == (False, True)
    assert _episode_end_flags(dm_env.transition(1.0, observation)) == (False, False)


def test_dmc_seeding() -> None:
    actions = np.random.default_rng(0).uniform(-1, 1, size=(100, 6)).astype(np.float32)
    env_a, env_b = make_dmcontrol_env("walker_walk", seed=7), make_dmcontrol_env("walker_walk", seed=7)
    obs_a, *_ = run_episode(env_a, actions)
    obs_b, *_ = run_episode(env_b, actions)
    np.testing.assert_array_equal(obs_a, obs_b)
    other = make_dmcontrol_env("walker_walk", seed=8).reset()[0]
    assert np.abs(other - obs_a[0]).max() > 1e-3
    # reset(seed=...) is a full reseed: the same first observation as a fresh env with that seed.
    np.testing.assert_array_equal(env_a.reset(seed=8)[0], other)
    np.testing.assert_array_equal(env_a.reset(seed=7)[0], obs_a[0])


def test_dmc_passes_sb3_check_env() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make_dmcontrol_env("walker_walk", seed=0))


def test_dmc_state_roundtrip() -> None:
    env = make_dmcontrol_env("cheetah_run", seed=0)
    env.reset()
    action = np.full(6, 0.5, dtype=np.float32)
    state = env.get_state()
    next_obs = env.step(action)[0]
    for _ in range(10):
        env.step(action)
    env.set_state(state)
    np.testing.assert_array_equal(env.get_state(), state)
    np.testing.assert_allclose(env.step(action)[0], next_obs, atol=1e-5)


def test_dmc_vec_env(tmp_path) -> None:
    vec = make_vec_dmcontrol_env("walker_walk", n_envs=2, seed=3, monitor_dir=str(tmp_path))
    assert vec.num_envs == 2 and vec.env_is_wrapped(Monitor) == [True, True]
    obs = vec.reset()
    for index in range(2):
        # Env i behaves like a single env seeded with seed + i.
        np.testing.assert_array_equal(obs[index], make_dmcontrol_env("walker_walk", seed=3 + index).reset()[0])
    assert np.abs(obs[0] - obs[1]).max() > 1e-3
    for step in range(1000):
        _, _, dones, infos = vec.step(np.zeros((2, 6), dtype=np.float32))
        assert dones.all() == (step == 999)
    for info in infos:
        assert info["episode"]["l"] == 1000 and info["TimeLimit.truncated"] is True
        assert info["terminal_observation"].shape == (24,)
    vec.close()
    assert sorted(os.listdir(tmp_path)) == ["0.monitor.csv", "1.monitor.csv"]


@pytest.mark.parametrize(("name", "n_envs"), [("walker_walk", 2), ("metaworld_button-press-topdown-v2", 1)])
def test_subproc_vec_env_matches_dummy(name: str, n_envs: int) -> None:
    # The default start method (forkserver) pickles the env factory: this checks it is picklable.
    subproc = make_benchmark_vec_env(name, n_envs=n_envs, seed=11, vec_env_cls=SubprocVecEnv)
    dummy = make_benchmark_vec_env(name, n_envs=n_envs, seed=11)
    actions = np.full((n_envs, *dummy.action_space.shape), 0.3, dtype=np.float32)
    np.testing.assert_array_equal(subproc.reset(), dummy.reset())
    np.testing.assert_allclose(subproc.step(actions)[0], dummy.step(actions)[0])
    subproc.close()
    dummy.close()


@needs_gl
def test_dmc_render() -> None:
    env = make_dmcontrol_env("walker_walk", seed=0, render_mode="rgb_array")
    env.reset()
    frame = env.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.std() > 5
    state = env.get_state()
    for _ in range(30):
        env.step(np.ones(6, dtype=np.float32))
    assert not np.array_equal(env.render(), frame)
    env.set_state(state)
    np.testing.assert_array_equal(env.render(), frame)
    env.close()


# ----------------------------------------------------------------------------- Meta-World


def test_metaworld_env_basics() -> None:
    env = make_metaworld_env("metaworld_button-press-topdown-v2", seed=0)
    assert isinstance(env, MetaWorldAdapter)
    assert env.observation_space.shape == (39,) and env.observation_space.dtype == np.float32
    assert env.action_space.shape == (4,) and env.action_space.dtype == np.float32
    actions = np.random.default_rng(0).uniform(-1, 1, size=(600, 4)).astype(np.float32)
    env.reset()
    for step, action in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(action)
        assert terminated is False and truncated == (step == 499)
        if truncated:
            break
    assert step == 499 and obs.dtype == np.float32 and isinstance(reward, float)
    assert "is_success" in info and "success" in info
    np.testing.assert_array_equal(obs[36:], 0.0)  # goal hidden, as in B-Pref


def test_metaworld_goal_resampling_and_seeding() -> None:
    def goals(env: MetaWorldAdapter, n: int = 4) -> np.ndarray:
        out = []
        for _ in range(n):
            env.reset()
            out.append(env.unwrapped._target_pos.copy())
        return np.array(out)

    goals_a = goals(make_metaworld_env(MW_TASK, seed=5))
    # A new goal at every reset...
    assert min(np.abs(goals_a[i] - goals_a[i + 1]).max() for i in range(3)) > 1e-4
    # ...and the same sequence for the same seed, a different one for another seed.
    np.testing.assert_array_equal(goals(make_metaworld_env(MW_TASK, seed=5)), goals_a)
    assert np.abs(goals(make_metaworld_env(MW_TASK, seed=6)) - goals_a).max() > 1e-4
    reseeded = make_metaworld_env(MW_TASK, seed=0)
    reseeded.reset(seed=5)
    np.testing.assert_array_equal(reseeded.unwrapped._target_pos, goals_a[0])
    actions = np.random.default_rng(1).uniform(-1, 1, size=(60, 4)).astype(np.float32)
    obs_a, *_ = run_episode(make_metaworld_env(MW_TASK, seed=5), actions)
    obs_b, *_ = run_episode(make_metaworld_env(MW_TASK, seed=5), actions)
    np.testing.assert_array_equal(obs_a, obs_b)
    observable = make_metaworld_env(MW_TASK, seed=5, goal_observable=True)
    np.testing.assert_allclose(observable.reset()[0][36:], goals_a[0], atol=1e-6)


def test_metaworld_success_is_sticky_within_an_episode() -> None:
    policies = pytest.importorskip("metaworld.policies")
    env = make_metaworld_env(MW_TASK, seed=0, max_episode_steps=120)
    policy = policies.SawyerButtonPressTopdownV3Policy()
    obs, _ = env.reset()
    success, is_success = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scripted policy warns about its own gains
        for step in range(120):
            # Press the button, then lift the hand so that it springs back up.
            action = policy.get_action(obs) if step < 80 else np.array([0.0, 0.0, 1.0, 0.0])
            obs, _, _, truncated, info = env.step(action)
            success.append(info["success"])
            is_success.append(info["is_success"])
    first = success.index(1.0)
    assert truncated and 0 < first < 80 and success[-1] == 0.0
    assert is_success == [step >= first for step in range(120)]
    env.reset()
    assert env.step(np.zeros(4))[-1]["is_success"] is False


def test_metaworld_success_rate_is_logged_by_ppo(tmp_path) -> None:
    vec = make_vec_metaworld_env(MW_TASK, n_envs=1, seed=0, monitor_dir=str(tmp_path), env_kwargs={"max_episode_steps": 50})
    assert vec.env_is_wrapped(Monitor) == [True]
    model = PPO("MlpPolicy", vec, n_steps=100, batch_size=50, n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(100)
    assert len(model.ep_success_buffer) == 2
    header, values = (line.split(",") for line in (tmp_path / "progress.csv").read_text().splitlines()[:2])
    logged = dict(zip(header, values))
    assert float(logged["rollout/ep_len_mean"]) == 50.0
    assert float(logged["rollout/success_rate"]) == np.mean(model.ep_success_buffer)
    assert "is_success" in (tmp_path / "0.monitor.csv").read_text().splitlines()[1]


def test_metaworld_vec_env_seeds() -> None:
    vec = make_vec_metaworld_env("metaworld_button-press-topdown-v2", n_envs=2, seed=3)
    obs = vec.reset()
    for index in range(2):
        np.testing.assert_array_equal(obs[index], make_metaworld_env(MW_TASK, seed=3 + index).reset()[0])
    assert np.abs(obs[0] - obs[1]).max() > 1e-4


def test_metaworld_state_roundtrip_keeps_goal_sequence() -> None:
    env, twin = make_metaworld_env(MW_TASK, seed=2), make_metaworld_env(MW_TASK, seed=2)
    env.reset()
    for _ in range(5):
        env.step(np.array([0.5, 0.0, -0.5, 1.0], dtype=np.float32))
    state, goal = env.get_state(), env.unwrapped._target_pos.copy()
    env.reset()
    assert np.abs(env.unwrapped._target_pos - goal).max() > 1e-4
    env.set_state(state)
    np.testing.assert_array_equal(env.unwrapped._target_pos, goal)
    np.testing.assert_array_equal(env.unwrapped.data.qpos, state["qpos"])
    # Restoring a goal does not consume the sampler's randomness.
    env.reset()
    for _ in range(3):
        twin.reset()
    np.testing.assert_array_equal(env.unwrapped._target_pos, twin.unwrapped._target_pos)


@needs_gl
def test_metaworld_render() -> None:
    env = make_metaworld_env(MW_TASK, seed=0, render_mode="rgb_array")
    env.reset()
    frame = env.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.std() > 5
    state = env.get_state()
    for _ in range(20):
        env.step(np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32))
    assert not np.array_equal(env.render(), frame)
    env.set_state(state)
    np.testing.assert_array_equal(env.render(), frame)
    env.close()
