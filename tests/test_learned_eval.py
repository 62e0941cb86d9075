"""
``LearnedRewardEvalCallback``: SB3's ``EvalCallback`` judged by the run's learned reward (``sb3_pref.common.learned_eval``).
"""

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.learned_eval import VEC_NORMALIZE_FILE, LearnedRewardEvalCallback

SMALL = dict(n_steps=64, batch_size=64, n_epochs=2, policy_kwargs={"net_arch": [16]}, seed=0, verbose=0)


def _model(env):
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, hidden_dim=16)
    return PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=30, num_interaction=128,
        unsuper_step=64, re_update=2, **SMALL,
    )  # fmt: skip


def test_it_keeps_the_policy_its_learned_reward_scores_highest(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = _model(env)
    judge = LearnedRewardEvalCallback(
        make_vec_env("Pendulum-v1", n_envs=1, seed=5), n_eval_episodes=2, eval_freq=64,
        best_model_save_path=str(tmp_path), log_path=str(tmp_path / "evals"),
    )  # fmt: skip
    model.learn(1024, callback=judge)
    log = np.load(tmp_path / "evals" / "evaluations.npz")  # EvalCallback's file name inside log_path
    assert len(log["timesteps"]) == 1024 // 64 and log["learned_results"].shape == (16, 2)
    # Pendulum's episodes are 200 steps: the env's returns are its own reward, -1600 to 0 per episode
    assert np.all(log["results"] <= 0) and np.all(log["results"] > -2000) and np.all(log["ep_lengths"] == 200)
    last_round = model.pref_learner.n_rounds
    assert last_round >= 3  # the reward changed during the run, so the best is the best since the last change
    best = PPO_REWARD.load(tmp_path / "best_model", env=env)
    assert judge.best_timestep is not None and judge.best_mean_learned_return > -np.inf
    # The saved policy is the one whose episodes scored best: replayed on the judge's first episodes (same env seed,
    # same reward model: the last round's) it scores what the callback recorded, if it was judged after that round.
    since_last = [i for i, t in enumerate(log["timesteps"]) if t >= judge.best_timestep]
    assert judge.best_mean_learned_return == pytest.approx(log["learned_results"][since_last[0]].mean())
    assert judge.best_mean_learned_return == pytest.approx(
        max(log["learned_results"][i].mean() for i in range(since_last[0], len(log["timesteps"])))
    )
    assert best.num_timesteps == judge.best_timestep


def test_a_new_reward_model_starts_a_new_comparison(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = _model(env)
    judge = LearnedRewardEvalCallback(make_vec_env("Pendulum-v1", n_envs=1, seed=5), n_eval_episodes=1, eval_freq=64)
    rounds_at_best = []
    on_step = judge._on_step

    def watched():
        keep = on_step()
        if model.num_timesteps % 64 == 0:
            rounds_at_best.append((model.pref_learner.n_rounds, judge.best_mean_learned_return))
        return keep

    judge._on_step = watched
    model.learn(512, callback=judge)
    # within one reward model the best never falls; across a round it may
    for (round_a, best_a), (round_b, best_b) in zip(rounds_at_best, rounds_at_best[1:]):
        if round_a == round_b:
            assert best_b >= best_a
    assert len({r for r, _ in rounds_at_best}) >= 2


def test_it_scores_raw_observations_under_vec_normalize():
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), norm_reward=False)
    model = _model(env)
    model.learn(512)

    def eval_env():
        wrapped = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=5), training=False, norm_reward=False)
        wrapped.obs_rms = env.obs_rms.copy()
        return wrapped

    judge = LearnedRewardEvalCallback(eval_env(), n_eval_episodes=1, eval_freq=1, verbose=0)
    judge.init_callback(model)
    (scored,), _, _ = judge._learned_returns()
    # the same episode replayed by hand: the reward model must see what the rollouts store, the raw observations
    replay, obs, done, raw, normalised, actions = eval_env(), None, False, [], [], []
    obs = replay.reset()
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        raw.append(replay.get_original_obs()[0])
        normalised.append(obs[0])
        actions.append(action[0])
        obs, _, dones, _ = replay.step(action)
        done = bool(dones[0])
    on_raw = float(model.pref_learner.predict_rewards(np.stack(raw), np.stack(actions)).sum())
    on_normalised = float(model.pref_learner.predict_rewards(np.stack(normalised), np.stack(actions)).sum())
    assert scored == pytest.approx(on_raw, rel=1e-5)
    assert abs(on_normalised - on_raw) > 1e-3 * abs(on_raw)  # else this test could not tell the two apart


def test_it_refuses_an_algorithm_without_a_learned_reward():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    with pytest.raises(TypeError, match="judges by a learned reward"):
        PPO("MlpPolicy", env, **SMALL).learn(64, callback=LearnedRewardEvalCallback(env, eval_freq=32))


def test_it_scores_discrete_actions_as_the_rollouts_encode_them():
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, hidden_dim=16)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=20, num_interaction=128,
        unsuper_step=64, re_update=2, **SMALL,
    )  # fmt: skip
    model.learn(256)
    judge = LearnedRewardEvalCallback(make_vec_env("CartPole-v1", n_envs=1, seed=5), n_eval_episodes=1, eval_freq=1)
    judge.init_callback(model)
    (scored,), (true_return,), (length,) = judge._learned_returns()
    replay = make_vec_env("CartPole-v1", n_envs=1, seed=5)
    obs, done, features, actions = replay.reset(), False, [], []
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        features.append(model._reward_features(obs)[0])
        actions.append(model._reward_actions(action)[0])
        obs, _, dones, _ = replay.step(action)
        done = bool(dones[0])
    assert np.stack(actions).shape == (length, 2) and set(np.unique(np.stack(actions))) <= {0.0, 1.0}  # one-hot
    assert true_return == length  # CartPole pays 1 per step
    assert scored == pytest.approx(float(model.pref_learner.predict_rewards(np.stack(features), np.stack(actions)).sum()))


def test_it_saves_the_normalisation_the_kept_policy_was_judged_with(tmp_path):
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), norm_reward=False)
    model = _model(env)
    eval_env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=5), training=False, norm_reward=False)
    judge = LearnedRewardEvalCallback(eval_env, n_eval_episodes=1, eval_freq=64, best_model_save_path=str(tmp_path))
    seen = {}
    on_step = judge._on_step

    def watched():
        best_before = judge.best_timestep
        keep = on_step()
        if judge.best_timestep != best_before:  # a new best: the statistics the judge just used
            seen[judge.best_timestep] = env.obs_rms.mean.copy()
        return keep

    judge._on_step = watched
    model.learn(1024, callback=judge)
    kept = VecNormalize.load(str(tmp_path / VEC_NORMALIZE_FILE), make_vec_env("Pendulum-v1", n_envs=1, seed=5))
    np.testing.assert_array_equal(kept.obs_rms.mean, seen[judge.best_timestep])
    # on this seed the best comes mid-run (step 448 of 1024), and the statistics moved after it: saving the end of the
    # run's statistics (or none) fails
    assert judge.best_timestep < model.num_timesteps
    assert not np.array_equal(kept.obs_rms.mean, env.obs_rms.mean)


def test_without_vec_normalize_it_saves_only_the_model(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    judge = LearnedRewardEvalCallback(
        make_vec_env("Pendulum-v1", n_envs=1, seed=5), n_eval_episodes=1, eval_freq=64, best_model_save_path=str(tmp_path)
    )
    _model(env).learn(512, callback=judge)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_model.zip"]
