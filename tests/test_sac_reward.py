"""SAC_REWARD (PEBBLE): replay-buffer relabelling, entropy pretraining and its reset, save/load, clear errors."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pref import PEBBLE, SAC_REWARD, RewardModel
from sb3_pref.common.controller import PHASE_PREFERENCE, PHASE_PRETRAIN
from sb3_pref.common.offpolicy import OffPolicyPreferenceMixin, relabel_replay_buffer
from sb3_pref.common.replay_samplers import EntropyRewardSampler

# Small networks: the behaviour under test does not depend on their size.
SMALL = dict(batch_size=32, policy_kwargs={"net_arch": [32, 32]}, learning_starts=40, buffer_size=5000, seed=0)
MODEL_KWARGS = dict(size_segment=10, mb_size=10, hidden_dim=32, ensemble_size=2)


def _model(env, **kwargs) -> SAC_REWARD:
    reward_model = RewardModel(env.observation_space, env.action_space, **MODEL_KWARGS)
    settings = dict(teacher="oracle", max_feed=40, num_interaction=60, unsuper_step=60, re_update=3, reset_update=5)
    return SAC_REWARD("MlpPolicy", env, reward_model=reward_model, **{**settings, **SMALL, **kwargs})


def _buffer_predictions(model: SAC_REWARD) -> tuple[np.ndarray, np.ndarray]:
    """(stored rewards, the reward model's predictions) of every stored transition, (rows, n_envs)."""
    buffer = model.replay_buffer
    rows = buffer.buffer_size if buffer.full else buffer.pos
    obs = buffer.observations[:rows].reshape(rows * buffer.n_envs, -1)
    actions = model.policy.unscale_action(buffer.actions[:rows].reshape(rows * buffer.n_envs, -1))
    encoder = model._pref_encoder
    predicted = model.pref_learner.predict_rewards(encoder.encode_obs(obs), encoder.encode_actions(actions))
    return buffer.rewards[:rows], predicted.reshape(rows, buffer.n_envs)


class _CheckAfterEachRound(BaseCallback):
    """After each query round (user callbacks run after the relabelling), compare the whole buffer with the model."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds_seen = 0
        self.errors: list[float] = []
        self.true_gaps: list[float] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        learner = self.model.pref_learner
        if learner.n_rounds > self.rounds_seen:
            self.rounds_seen = learner.n_rounds
            stored, predicted = _buffer_predictions(self.model)
            self.errors.append(float(np.abs(stored - predicted).max()))
            self.true_gaps.append(float(np.abs(stored).mean()))


def test_buffer_rewards_equal_the_reward_model_predictions_after_each_round():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = _model(env)
    check = _CheckAfterEachRound()
    model.learn(400, callback=check)
    counters = model.pref_learner.counters()
    assert counters["total_feed"] == 40 and check.rounds_seen == 4, (counters, check.rounds_seen)
    # Every stored transition, old ones included, carries the current model's reward after each round.
    assert len(check.errors) == 4 and max(check.errors) < 1e-5, check.errors
    stored, predicted = _buffer_predictions(model)
    np.testing.assert_allclose(stored, predicted, atol=1e-5)


def test_pretraining_trains_on_the_entropy_reward_then_resets_the_critic_as_pebble():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = _model(env, unsuper_step=100, num_interaction=1000)
    model.learn(120, unsuper_flag=1)  # 40 seed + 80 pretraining steps: still pretraining
    assert model._rollout_phase == PHASE_PRETRAIN and not model._pretrain_done
    assert model.pref_learner.n_rounds == 0
    # Sampled batches get the k-NN state-entropy reward of their (raw) observations.
    sampler = EntropyRewardSampler(model.replay_buffer, model)
    th.manual_seed(0)
    data = sampler.sample(64)
    obs = data.observations.numpy()
    distances = model.entropy_reward.knn_distance(obs)
    ratio = data.rewards.numpy().ravel() / distances
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-4)  # reward = distance / running std
    assert model.entropy_reward.size == 120, "the k-NN set holds every pretraining state"
    critic_before = [p.detach().clone() for p in model.policy.critic.parameters()]
    actor_before = [p.detach().clone() for p in model.policy.actor.parameters()]
    actor_steps = model.policy.actor.optimizer.state_dict()["state"][0]["step"].item()

    model.learn(40, reset_num_timesteps=False)  # pretraining ends at 140 steps
    assert model._pretrain_done and model._rollout_phase == PHASE_PREFERENCE and model.entropy_reward is None
    # The first round is uniform, right at the end of pretraining.
    assert model.pref_learner.n_rounds == 1 and model.pref_learner.counters()["total_feed"] == 10
    # The critic was re-initialised (a change of the init's own size), the actor only trained (small steps).
    critic_change = max((a - b).abs().max().item() for a, b in zip(model.policy.critic.parameters(), critic_before))
    actor_change = max((a - b).abs().max().item() for a, b in zip(model.policy.actor.parameters(), actor_before))
    assert critic_change > 0.1 and actor_change < 0.05, (critic_change, actor_change)
    # The critic's optimizer restarted at the reset: fewer Adam steps than the actor's, by the steps before it.
    critic_steps = model.policy.critic.optimizer.state_dict()["state"][0]["step"].item()
    actor_steps_now = model.policy.actor.optimizer.state_dict()["state"][0]["step"].item()
    # 40 env steps with one gradient step each, plus reset_update=5 right after the reset (at step 140).
    assert actor_steps_now - actor_steps == 40 + 5, (actor_steps, actor_steps_now)
    assert critic_steps == 20 + 5, critic_steps


def test_without_the_critic_reset_and_the_uniform_first_round_pretraining_ends_as_asked(monkeypatch):
    """PEBBLE's two details as options: reset_critic=False keeps the critic, first_round_uniform=False uses feed_type."""
    from sb3_pref.core import pair_draws
    from sb3_pref.core.query import resolve_query_method

    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = _model(
        env, unsuper_step=100, num_interaction=1000, reset_critic=False, first_round_uniform=False, feed_type="disagreement"
    )
    model.learn(120, unsuper_flag=1)
    methods: list = []
    draw = pair_draws.draw_queries
    monkeypatch.setattr(pair_draws, "draw_queries", lambda *args: (methods.append(args[4]), draw(*args))[1])
    critic_before = [p.detach().clone() for p in model.policy.critic.parameters()]
    actor_steps = model.policy.actor.optimizer.state_dict()["state"][0]["step"].item()
    critic_steps = model.policy.critic.optimizer.state_dict()["state"][0]["step"].item()
    model.learn(40, reset_num_timesteps=False)  # pretraining ends at 140 steps
    assert model._pretrain_done and model.pref_learner.n_rounds == 1
    assert methods == [resolve_query_method("disagreement")]  # the first round, at the end of pretraining
    # The critic only trained (the default's reset changes it by more than 0.1), its optimizer went on counting,
    # and no reset_update steps were added: 40 env steps, one gradient step each, for actor and critic alike.
    critic_change = max((a - b).abs().max().item() for a, b in zip(model.policy.critic.parameters(), critic_before))
    assert critic_change < 0.05, critic_change
    actor_steps_now = model.policy.actor.optimizer.state_dict()["state"][0]["step"].item()
    critic_steps_now = model.policy.critic.optimizer.state_dict()["state"][0]["step"].item()
    assert actor_steps_now - actor_steps == 40 and critic_steps_now - critic_steps == 40


def test_pretraining_looks_up_the_entropy_reward_and_trains_as_with_the_search(monkeypatch):
    # The sampler reads the k-NN distances of the rows it drew instead of searching the whole set per batch
    # (PEBBLE's cost during pretraining); the same run with the search must end with the same networks.
    from sb3_pref.core.entropy import StateEntropyReward

    lookup_calls, search_calls = [], []
    score_rows, score = StateEntropyReward.score_rows, StateEntropyReward.score

    def counted_rows(self, rows):
        lookup_calls.append(len(rows))
        return score_rows(self, rows)

    def counted_score(self, obs):
        search_calls.append(len(obs))
        return score(self, obs)

    def trained(patch_lookup):
        with monkeypatch.context() as patch:
            patch.setattr(StateEntropyReward, "score", counted_score)
            patch.setattr(StateEntropyReward, "score_rows", patch_lookup)
            model = _model(make_vec_env("Pendulum-v1", n_envs=1, seed=0), unsuper_step=150, num_interaction=1000)
            model.learn(190)  # 40 seed steps and 150 of pretraining: every gradient step on the entropy reward
        return [p.detach().clone() for p in model.policy.parameters()]

    with_lookup = trained(counted_rows)
    assert len(lookup_calls) == 150 and search_calls == [], (len(lookup_calls), len(search_calls))
    lookup_calls.clear()
    with_search = trained(lambda self, rows: self.score(self.buffer[rows].numpy()))
    assert len(search_calls) == 150
    assert all(th.equal(a, b) for a, b in zip(with_lookup, with_search))


def test_save_load_continue_keeps_the_budget_and_relabels_the_buffer(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = _model(env)
    model.learn(200)
    feed_before = model.pref_learner.counters()["total_feed"]
    assert 0 < feed_before < 40
    model.save(tmp_path / "pebble")
    model.save_replay_buffer(tmp_path / "buffer")
    loaded = SAC_REWARD.load(tmp_path / "pebble", env=env)
    loaded.load_replay_buffer(tmp_path / "buffer")
    assert loaded.pref_learner.counters()["total_feed"] == feed_before
    assert loaded._pretrain_done and loaded.num_timesteps == 200
    assert loaded.replay_buffer.pos == model.replay_buffer.pos
    loaded.learn(300, reset_num_timesteps=False)
    assert loaded.pref_learner.counters()["total_feed"] == 40, "the budget continues, and is not asked twice"
    assert loaded.num_timesteps == 500
    stored, predicted = _buffer_predictions(loaded)
    np.testing.assert_allclose(stored, predicted, atol=1e-5)


@pytest.mark.parametrize("make_env", [lambda: gym.make("CartPole-v1"), lambda: make_vec_env("CartPole-v1", n_envs=2)])
def test_a_discrete_action_space_gets_a_clear_error(make_env):
    env = make_env()
    reward_model = RewardModel(env.observation_space, env.action_space, **MODEL_KWARGS)
    with pytest.raises(ValueError, match=r"continuous \(Box\) action space.*PPO_REWARD"):
        SAC_REWARD("MlpPolicy", env, reward_model=reward_model)
    with pytest.raises(ValueError, match="PPO_REWARD"):
        PEBBLE("MlpPolicy", "CartPole-v1")


def test_on_policy_rlhf_options_are_refused_and_the_bpref_call_shape_works():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, **MODEL_KWARGS)
    with pytest.raises(TypeError, match="reference_policy"):
        SAC_REWARD("MlpPolicy", env, reward_model=reward_model, reference_policy="initial")

    # Through the mixin (a subclass that passes everything on), the refusal names the option and the fix.
    class OpenSAC(OffPolicyPreferenceMixin, SAC):
        pass

    for option in ({"whiten_reward": True}, {"reference_policy": "initial"}, {"zero_value_head": True}):
        with pytest.raises(ValueError, match=f"{next(iter(option))}=.*PPO_REWARD"):
            OpenSAC("MlpPolicy", env, reward_model=reward_model, **option)
    model = SAC_REWARD(reward_model, "MlpPolicy", env, max_feed=20, **SMALL)
    assert model.reward_model is reward_model and model.max_feed == 20 and model.learning_rate == 3e-4


def test_relabelling_is_batched_with_bounded_memory():
    obs_space = spaces.Box(-1, 1, (3,), np.float32)
    act_space = spaces.Box(-1, 1, (2,), np.float32)
    buffer = ReplayBuffer(200, obs_space, act_space, device="cpu", n_envs=2)  # 100 rows of 2 envs
    rng = np.random.default_rng(0)
    for _ in range(70):  # 70 of 100 rows filled: the empty rows are left alone
        obs = rng.standard_normal((2, 3)).astype(np.float32)
        buffer.add(obs, obs, rng.uniform(-1, 1, (2, 2)), np.zeros(2), np.zeros(2), [{}, {}])
    calls: list[int] = []

    def reward_fn(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        calls.append(len(obs))
        return obs.sum(axis=1) + 10 * actions[:, 0]

    n = relabel_replay_buffer(buffer, reward_fn, chunk_size=25)
    assert n == 140 and sum(calls) == 140 and max(calls) <= 25, calls
    expected = buffer.observations[:70].sum(axis=2) + 10 * buffer.actions[:70, :, 0]
    np.testing.assert_allclose(buffer.rewards[:70], expected, rtol=1e-6)
    assert np.all(buffer.rewards[70:] == 0)
    for _ in range(45):  # wraps around: every row is relabelled
        buffer.add(obs, obs, rng.uniform(-1, 1, (2, 2)), np.zeros(2), np.zeros(2), [{}, {}])
    calls.clear()
    assert relabel_replay_buffer(buffer, reward_fn, chunk_size=64) == 200 and max(calls) <= 64
    expected = buffer.observations.sum(axis=2) + 10 * buffer.actions[:, :, 0]
    np.testing.assert_allclose(buffer.rewards, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="chunk_size"):
        relabel_replay_buffer(buffer, reward_fn, chunk_size=0)


def test_vecnormalize_the_reward_model_sees_raw_observations_and_norm_reward_is_refused():
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), norm_obs=True, norm_reward=False)
    model = _model(env)
    model.learn(200)
    stored, predicted = _buffer_predictions(model)  # predictions from the buffer's raw observations
    np.testing.assert_allclose(stored, predicted, atol=1e-5)
    # Raw Pendulum observations (cos, sin within [-1, 1]); normalised ones would leave that range.
    assert np.abs(model.replay_buffer.observations[:200, :, :2]).max() <= 1.0 + 1e-6
    bad = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), norm_reward=True)
    with pytest.raises(ValueError, match="norm_reward=False"):
        _model(bad).learn(10)


def test_bpref_overrides_build_the_pebble_of_its_scripts():
    from sb3_pref.experiments.pebble import PEBBLE_TASKS, make_pebble, parse_overrides

    config = parse_overrides(["env=walker_walk", "max_feedback=1000", "reward_batch=100", "num_train_steps=1e3"])
    # walker_walk's script: lr 5e-4, 20000 steps between rounds, 50 reward epochs; B-Pref's SAC: 2 x 1024 nets.
    assert config["agent.params.actor_lr"] == 5e-4 and config["num_interact"] == 20_000
    assert config["reward_update"] == 50 and config["num_train_steps"] == 1000 and config["max_feedback"] == 1000
    assert set(PEBBLE_TASKS) >= {"walker_walk", "cheetah_run", "quadruped_walk", "metaworld_sweep-into-v2"}
    config.update({"diag_gaussian_actor.params.hidden_dim": 16, "double_q_critic.params.hidden_dim": 16})
    model = make_pebble(config, make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    assert model.max_feed == 1000 and model.reward_model.mb_size == 100 and model.learning_starts == 1000
    assert model.target_update_interval == 2 and model.unsuper_step == 9000 and model.batch_size == 1024
    assert model.policy.critic.q_networks[0][0].out_features == 16
    # Pendulum-v1 has no B-Pref script: train_PEBBLE.py's quick CPU-sized run (SB3's SAC defaults, 200 labels, 20k steps).
    quick = parse_overrides(["env=Pendulum-v1", "seed=3"])
    assert quick["num_train_steps"] == 20_000 and quick["num_unsup_steps"] == 2000
    assert quick["max_feedback"] == 200 and quick["reward_batch"] == 25
    assert quick["agent.params.batch_size"] == 256 and quick["double_q_critic.params.hidden_dim"] == 256
    assert quick["reward_hidden_dim"] == 64 and quick["seed"] == 3
    with pytest.raises(ValueError, match="unknown setting 'max_feed': did you mean max_feedback"):
        parse_overrides(["max_feed=10"])
    # a misspelt boolean is refused, not read as False
    with pytest.raises(ValueError, match=r"reset_critic='ture': expected true or false"):
        parse_overrides(["reset_critic=ture"])
    assert parse_overrides(["reset_critic=false"])["reset_critic"] is False
    assert parse_overrides(["reset_critic=True"])["reset_critic"] is True
    with pytest.raises(ValueError, match="--env needs a value: --env VALUE, --env=VALUE or env=VALUE"):
        parse_overrides(["--env"])
    # the other examples' flags read as the same settings, and a typo in one is named the same way
    flags = parse_overrides(["--max-feedback", "300", "--env=cartpole_swingup", "seed=4", "--agent.params.actor_lr", "1e-3"])
    assert flags == parse_overrides(["max_feedback=300", "env=cartpole_swingup", "seed=4", "agent.params.actor_lr=1e-3"])
    assert flags["max_feedback"] == 300 and flags["agent.params.actor_lr"] == 1e-3 and flags["env"] == "cartpole_swingup"
    with pytest.raises(ValueError, match="unknown setting 'max_feed': did you mean max_feedback"):
        parse_overrides(["--max-feed", "10"])


def test_relabelling_a_dict_replay_buffer_passes_every_key():
    from stable_baselines3.common.buffers import DictReplayBuffer

    obs_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,), np.float32), "b": spaces.Box(-1, 1, (3,), np.float32)})
    buffer = DictReplayBuffer(30, obs_space, spaces.Box(-1, 1, (1,), np.float32), device="cpu", n_envs=1)
    rng = np.random.default_rng(1)
    for _ in range(12):
        obs = {key: rng.standard_normal((1, *space.shape)).astype(np.float32) for key, space in obs_space.items()}
        buffer.add(obs, obs, rng.uniform(-1, 1, (1, 1)), np.zeros(1), np.zeros(1), [{}])

    def reward_fn(obs: dict, actions: np.ndarray) -> np.ndarray:
        return obs["a"].sum(axis=1) - obs["b"].sum(axis=1) + actions[:, 0]

    assert relabel_replay_buffer(buffer, reward_fn, chunk_size=5) == 12
    observations = buffer.observations
    expected = observations["a"][:12].sum(-1) - observations["b"][:12].sum(-1) + buffer.actions[:12, :, 0]
    np.testing.assert_allclose(buffer.rewards[:12], expected, rtol=1e-6)
