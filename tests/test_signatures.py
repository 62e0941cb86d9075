"""PPO_REWARD's explicit signature, config-only use (reward_model_kwargs) and arguments that need a model."""

import inspect

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.onpolicy import PreferenceRewardMixin

SMALL = dict(n_steps=64, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]}, seed=0)
MODEL_KWARGS = dict(size_segment=10, mb_size=10, hidden_dim=16, ensemble_size=2, teacher_beta=2.0)


def test_signature_lists_every_ppo_and_preference_parameter_with_its_default():
    ours = inspect.signature(PPO_REWARD).parameters
    ppo = inspect.signature(PPO).parameters
    mixin = {
        name: parameter
        for name, parameter in inspect.signature(PreferenceRewardMixin.__init__).parameters.items()
        if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ours.values()), "no *args/**kwargs"
    # PPO's parameters first, in PPO's order and with its defaults, then every preference parameter.
    assert list(ours)[: len(ppo)] == list(ppo)
    own = {"value_loss"}  # PPO_REWARD's own (its update), after the preference parameters
    assert set(ours) == set(ppo) | set(mixin) | own, f"missing: {set(ppo) | set(mixin) | own - set(ours)}"
    assert ours["value_loss"].default == "sb3" and ":param value_loss:" in PPO_REWARD.__doc__
    for name, parameter in [*ppo.items(), *mixin.items()]:
        assert ours[name].default == parameter.default, name
    learn = inspect.signature(PPO_REWARD.learn)
    assert learn.return_annotation is not inspect.Signature.empty
    assert "unsuper_flag" in learn.parameters and learn.parameters["tb_log_name"].default == "PPO_REWARD"
    # The API page and help() see the parameters too.
    assert ":param reward_model_kwargs:" in PPO_REWARD.__doc__ and ":param n_epochs:" in PPO_REWARD.__doc__


def test_bpref_positional_call_shape_still_works():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10)
    model = PPO_REWARD(reward_model, "MlpPolicy", env, learning_rate=1e-3, max_feed=30, **SMALL)
    assert model.reward_model is reward_model and model.learning_rate == 1e-3 and model.max_feed == 30
    with pytest.raises(ValueError, match="both positionally and as a keyword"):
        PPO_REWARD(reward_model, "MlpPolicy", env, reward_model=reward_model)


def test_reward_model_kwargs_builds_from_the_env_spaces_and_survives_save_load(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model_kwargs=MODEL_KWARGS, max_feed=20, num_interaction=128, unsuper_step=128,
        unsuper_n_epochs=1, re_update=2, **SMALL,
    )  # fmt: skip
    reward_model = model.reward_model
    assert isinstance(reward_model, RewardModel)
    assert (reward_model.obs_dim, reward_model.act_dim, reward_model.hidden_dim, reward_model.ensemble_size) == (3, 1, 16, 2)
    assert model.unsuper_flag == 1, "a model from kwargs pretrains and learns preferences as a model object does"
    model.learn(64 * 2 * 3)
    assert model.pref_learner.counters()["total_feed"] > 0
    model.save(tmp_path / "model")
    loaded = PPO_REWARD.load(tmp_path / "model", env=env)
    assert loaded.reward_model is not reward_model
    assert loaded.reward_model_kwargs == MODEL_KWARGS
    # Same weights and the kwargs' teacher (beta=2), not a default oracle.
    obs, act = np.random.default_rng(0).normal(size=(5, 3)), np.random.default_rng(1).normal(size=(5, 1))
    predict = [m.reward_model.predict_obs_action(obs, act) for m in (loaded, model)]
    np.testing.assert_allclose(predict[0], predict[1], atol=1e-6)
    assert loaded.pref_learner.teacher.beta == 2.0
    # One model per construction: two algorithms from one config never share a model.
    other = PPO_REWARD("MlpPolicy", env, reward_model_kwargs=MODEL_KWARGS, **SMALL)
    assert other.reward_model is not reward_model
    assert not th.equal(next(iter(other.reward_model.ensemble.parameters())), next(iter(reward_model.ensemble.parameters())))


def test_empty_reward_model_kwargs_is_a_default_reward_model_not_the_env_reward(tmp_path):
    # {} (a YAML's "reward_model_kwargs: {}") asks for a reward model of the default settings; it once built none and
    # trained on the env's reward without a word
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = PPO_REWARD("MlpPolicy", env, reward_model_kwargs={}, teacher="oracle", max_feed=20, **SMALL)
    assert isinstance(model.reward_model, RewardModel) and model.reward_model.size_segment == 50
    assert model.unsuper_flag == 1 and model.reward_model_kwargs == {}
    model.learn(64 * 2 * 8)
    assert model.pref_learner.counters()["total_feed"] == 20
    model.save(tmp_path / "model")
    assert PPO_REWARD.load(tmp_path / "model", env=env).reward_model_kwargs == {}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(teacher="oracle", max_feed=100), "teacher, max_feed given without a reward model"),
        (dict(num_interaction=500), "num_interaction given without a reward model"),
        (dict(reward_model_kwargs={"obs_dim": 3}), "must not contain 'obs_dim'"),
        (dict(reward_model_kwargs=[1]), "reward_model_kwargs must be a dict"),
    ],
)
def test_preference_arguments_without_a_model_are_refused(kwargs, match):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    with pytest.raises(ValueError, match=match):
        PPO_REWARD("MlpPolicy", env, **kwargs)
    # Pretraining alone (B-Pref's PPO + unsupervised pretraining baseline) needs no model.
    model = PPO_REWARD("MlpPolicy", env, unsuper_flag=2, unsuper_step=64, max_ep_len=200, **SMALL)
    assert model.reward_model is None


def test_both_a_model_and_its_kwargs_are_refused():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space)
    with pytest.raises(ValueError, match="reward_model and reward_model_kwargs were both given"):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, reward_model_kwargs={"lr": 1e-3})


# Packages mypy must find clean: every package of sb3_pref (a new one is added here when it is clean).
MYPY_CLEAN_PACKAGES = (
    "sb3_pref.common", "sb3_pref.core", "sb3_pref.ppo_reward", "sb3_pref.sac_reward", "sb3_pref.envs",
    "sb3_pref.human", "sb3_pref.zoo", "sb3_pref.rl2", "sb3_pref.experiments", "sb3_pref.ad",
)  # fmt: skip


def test_mypy_is_clean_on_the_typed_packages():
    """``py.typed`` is shipped: the packages a user imports type-check, under the project's SB3-style mypy settings."""
    import os
    import subprocess
    import sys

    pytest.importorskip("mypy", reason="pip install -e '.[tests]'")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # every package is listed: one left out is only followed, and mypy keeps quiet about what it only follows
    found = {
        f"sb3_pref.{name}" for name in os.listdir(os.path.join(repo, "sb3_pref"))
        if os.path.isfile(os.path.join(repo, "sb3_pref", name, "__init__.py"))
    }  # fmt: skip
    assert found == set(MYPY_CLEAN_PACKAGES), found ^ set(MYPY_CLEAN_PACKAGES)
    packages = [flag for package in MYPY_CLEAN_PACKAGES for flag in ("-p", package)]
    # The cache outside the checkout (unless MYPY_CACHE_DIR says where): a fresh clone, as CI's, otherwise starts mypy
    # cold, 45 s of re-reading torch's and SB3's sources on 2 cores; warm, 1 s. mypy re-checks whatever changed (it
    # compares the sources' hashes), so a cache from another checkout gives the same verdict.
    cache = os.environ.get("MYPY_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "sb3_pref", "mypy"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *packages, "-m", "sb3_pref"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": repo, "MYPY_CACHE_DIR": cache},
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_every_algorithm_and_the_human_teacher_import_from_the_package_root():
    import subprocess
    import sys

    import sb3_pref
    from sb3_pref.ad import AD
    from sb3_pref.human import HumanTeacher
    from sb3_pref.rl2 import RL2

    assert (sb3_pref.AD, sb3_pref.RL2, sb3_pref.HumanTeacher) == (AD, RL2, HumanTeacher)
    assert {"AD", "RL2", "HumanTeacher", "PPO_REWARD", "SAC_REWARD"} <= set(sb3_pref.__all__) & set(dir(sb3_pref))
    with pytest.raises(AttributeError, match="no attribute 'PPO2'"):
        sb3_pref.PPO2  # noqa: B018
    # ``import sb3_pref`` alone leaves them unloaded (the transformer, sb3-contrib, the labelling page's extras).
    code = "import sys, sb3_pref; print(' '.join(m.split('.')[1] for m in sys.modules if m.startswith('sb3_pref.')))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "common" in loaded and not {"ad", "human", "rl2"} & loaded, loaded
