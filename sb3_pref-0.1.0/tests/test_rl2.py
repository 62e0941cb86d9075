import csv

import numpy as np
import pytest
import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_pref.envs.bandit import BernoulliBandit
from sb3_pref.envs.darkroom import DarkRoom, darkroom_trials
from sb3_pref.envs.trial import TrialWrapper
from sb3_pref.rl2 import RL2, MlpGruPolicy, RL2Policy
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv
from sb3_pref.rl2.policies import GRUWithCellState

EPISODES, LENGTH = 2, 3  # trials of 2 inner episodes of 3 steps: 6 steps


def tiny_env(n_envs: int = 2) -> DummyVecEnv:
    return DummyVecEnv(
        [
            lambda i=i: TrialWrapper(DarkRoom(goals=[(4, 5), (5, 4)], episode_length=LENGTH), EPISODES, seed=i)
            for i in range(n_envs)
        ]
    )


def tiny_model(cell: str = "lstm", **kwargs) -> RL2:
    kwargs = {"n_steps": 2 * EPISODES * LENGTH, "batch_size": 8, "n_epochs": 1, "seed": 0, **kwargs}
    policy = "MlpGruPolicy" if cell == "gru" else "MlpLstmPolicy"
    return RL2(policy, tiny_env(), policy_kwargs=dict(lstm_hidden_size=8, net_arch=[8]), **kwargs)


def collect(model: RL2) -> None:
    _, callback = model._setup_learn(model.n_steps * model.n_envs, None)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_hidden_state_carried_across_inner_episodes_reset_at_trial_start(cell):
    model = tiny_model(cell)
    collect(model)
    buffer = model.rollout_buffer
    trial_starts = np.zeros((model.n_steps, model.n_envs))
    trial_starts[[0, EPISODES * LENGTH]] = 1.0
    # With the trial wrapper, RecurrentPPO's episode starts are the trial starts, not the inner ones.
    np.testing.assert_array_equal(buffer.episode_starts, trial_starts)

    policy = model.policy
    for env in range(model.n_envs):
        for step in range(model.n_steps - 1):
            obs = th.as_tensor(buffer.observations[step, env : env + 1])
            state_in = tuple(th.as_tensor(s[step, :, env : env + 1]) for s in (buffer.hidden_states_pi, buffer.cell_states_pi))
            start = th.as_tensor(buffer.episode_starts[step, env : env + 1])
            zeros = tuple(th.zeros_like(s) for s in state_in)
            with th.no_grad():
                _, state_out = policy.get_distribution(obs, state_in, start)
                _, from_zero = policy.get_distribution(obs, zeros, th.zeros(1))
            # The state stored for the next step is the one this step produced.
            th.testing.assert_close(state_out[0], th.as_tensor(buffer.hidden_states_pi[step + 1, :, env : env + 1]))
            if step % (EPISODES * LENGTH) == 0:  # trial start: the carried state is dropped
                assert state_in[0].abs().sum() > 0 or step == 0
                th.testing.assert_close(state_out[0], from_zero[0])
            else:  # inside a trial, including an inner episode's first step (step 3): carried
                assert state_in[0].abs().sum() > 0
                assert not th.allclose(state_out[0], from_zero[0])


def test_gae_crosses_inner_episodes_not_trials():
    model = tiny_model(gamma=0.9, gae_lambda=0.8)
    collect(model)
    buffer = model.rollout_buffer
    rewards, values, starts = buffer.rewards, buffer.values, buffer.episode_starts

    def gae(cut_inner: bool) -> np.ndarray:
        advantages, last = np.zeros_like(rewards), np.zeros(model.n_envs)
        for step in reversed(range(model.n_steps)):
            if step == model.n_steps - 1:
                # The rollout ends with a trial end, so the last value is never used.
                next_value, non_terminal = np.zeros(model.n_envs), 0.0
            else:
                next_value = values[step + 1]
                non_terminal = 1.0 - starts[step + 1]
                if cut_inner and (step + 1) % LENGTH == 0:
                    non_terminal = np.zeros(model.n_envs)
            delta = rewards[step] + 0.9 * next_value * non_terminal - values[step]
            last = delta + 0.9 * 0.8 * non_terminal * last
            advantages[step] = last
        return advantages

    np.testing.assert_allclose(buffer.advantages, gae(cut_inner=False), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(buffer.returns, buffer.advantages + values, rtol=1e-5, atol=1e-6)
    # Cutting at inner episode ends changes the last step of each inner episode: the buffer did not cut.
    assert np.abs(gae(cut_inner=True)[LENGTH - 1] - buffer.advantages[LENGTH - 1]).min() > 1e-4


@pytest.mark.parametrize("recurrent_cell", ["lstm", "gru"])
def test_one_call_sequence_pass_matches_step_loop(recurrent_cell):
    th.manual_seed(0)
    policy = RL2Policy(tiny_env().observation_space, tiny_env().action_space, lambda _: 1e-3, recurrent_cell=recurrent_cell)
    assert isinstance(policy.lstm_actor, GRUWithCellState) == (recurrent_cell == "gru")
    n_seq, length, size = 3, 5, policy.lstm_actor.hidden_size
    features = th.randn(n_seq * length, policy.features_dim)
    states = (th.randn(1, n_seq, size), th.randn(1, n_seq, size))
    starts = th.zeros(n_seq, length)
    starts[0, 0] = starts[2, 0] = 1.0  # as the buffer cuts them: resets only at sequence starts
    fast, fast_states = RL2Policy._process_sequence(features, states, starts.flatten(), policy.lstm_actor)
    loop, loop_states = RecurrentActorCriticPolicy._process_sequence(features, states, starts.flatten(), policy.lstm_actor)
    th.testing.assert_close(fast, loop, rtol=1e-5, atol=1e-6)
    th.testing.assert_close(fast_states[0], loop_states[0], rtol=1e-5, atol=1e-6)
    starts[1, 3] = 1.0  # a reset inside a sequence takes the parent's loop
    fast, _ = RL2Policy._process_sequence(features, states, starts.flatten(), policy.lstm_actor)
    loop, _ = RecurrentActorCriticPolicy._process_sequence(features, states, starts.flatten(), policy.lstm_actor)
    th.testing.assert_close(fast, loop)


def test_training_matches_recurrent_ppo():
    # Same seed, env and settings: RL2 with an LSTM trains exactly like RecurrentPPO, only faster.
    kwargs = dict(n_steps=12, batch_size=8, n_epochs=2, seed=3, policy_kwargs=dict(lstm_hidden_size=8))
    rl2 = RL2("MlpLstmPolicy", tiny_env(), **kwargs).learn(48)
    ppo = RecurrentPPO("MlpLstmPolicy", tiny_env(), **kwargs).learn(48)
    for ours, theirs in zip(rl2.policy.parameters(), ppo.policy.parameters()):
        th.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_save_load_gives_identical_actions(cell, tmp_path):
    model = tiny_model(cell).learn(48)
    model.save(tmp_path / "rl2")
    loaded = RL2.load(tmp_path / "rl2", env=tiny_env())
    assert type(loaded.policy) is type(model.policy) and loaded.policy.recurrent_cell == cell
    env = tiny_env()
    obs = env.reset()
    states = {"model": None, "loaded": None}
    starts = np.ones(env.num_envs, dtype=bool)
    for _ in range(3 * EPISODES * LENGTH):
        actions, states["model"] = model.predict(obs, states["model"], starts, deterministic=True)
        same, states["loaded"] = loaded.predict(obs, states["loaded"], starts, deterministic=True)
        np.testing.assert_array_equal(actions, same)
        np.testing.assert_array_equal(states["model"][0], states["loaded"][0])
        obs, _, starts, _ = env.step(actions)
    policy_path = tmp_path / "policy.pt"
    model.policy.save(policy_path)
    alone = MlpGruPolicy.load(policy_path) if cell == "gru" else RL2Policy.load(policy_path)
    assert alone.lstm_actor.hidden_size == 8


@pytest.mark.filterwarnings("ignore:rich is experimental")
def test_logs_by_episode_index_and_vec_wrappers(tmp_path):
    env = VecNormalize(
        make_vec_env(lambda: darkroom_trials("train", episodes_per_trial=3), n_envs=2, seed=0), norm_reward=False
    )
    model = RL2("MlpGruPolicy", env, n_steps=60, batch_size=60, n_epochs=1, seed=0, policy_kwargs=dict(lstm_hidden_size=8))
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(240, progress_bar=True)
    with open(tmp_path / "progress.csv") as handle:
        rows = list(csv.DictReader(handle))
    for k in range(3):
        assert f"rollout/return_ep{k}" in rows[-1] and f"rollout/success_ep{k}" in rows[-1]
        assert len(model._episode_returns[k]) == 4  # 240 steps = 4 trials of 3 x 20 steps
    last = rows[-1]
    assert float(last["rollout/return_ep0"]) == pytest.approx(np.mean(model._episode_returns[0]))
    # Monitor wraps the trial wrapper: ep_rew_mean is the mean trial return.
    trial_means = sum(np.mean(model._episode_returns[k]) for k in range(3))
    assert float(last["rollout/ep_rew_mean"]) == pytest.approx(trial_means, abs=1e-6)
    assert float(last["rollout/ep_len_mean"]) == 60


def test_warns_without_trial_wrapper():
    with pytest.warns(UserWarning, match="TrialWrapper"):
        RL2("MlpLstmPolicy", DummyVecEnv([DarkRoom]), n_steps=8, batch_size=8)


def test_extra_learn_arguments_reach_a_mixin():
    class Mixin:
        def __init__(self, *args, flag: int = 0, **kwargs):
            self.flag = flag
            super().__init__(*args, **kwargs)

        def learn(self, *args, unsuper_flag=None, **kwargs):
            self.seen_flag = unsuper_flag
            return super().learn(*args, **kwargs)

    class Combined(Mixin, RL2):
        pass

    model = Combined(
        "MlpLstmPolicy", tiny_env(), flag=1, n_steps=6, batch_size=6, n_epochs=1, policy_kwargs=dict(lstm_hidden_size=4)
    )
    model.learn(12, unsuper_flag=2)
    assert (model.flag, model.seen_flag) == (1, 2)


def test_evaluate_adaptation_resets_state_only_at_trial_starts(tmp_path):
    class Recording(RandomAgent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.starts = []

        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            self.starts.append(np.array(episode_start))
            return super().predict(observation, state, episode_start, deterministic)

    env = tiny_env(n_envs=2)
    agent = Recording(env.action_space, seed=0)
    result = evaluate_adaptation(agent, env, n_trials=5, seed=0)
    assert result.returns.shape == result.successes.shape == (5, EPISODES)
    starts = np.array(agent.starts)
    assert starts.shape == (3 * EPISODES * LENGTH, 2)  # 3 trials per env to collect 3 + 2
    expected = np.zeros_like(starts)
    expected[:: EPISODES * LENGTH] = True
    np.testing.assert_array_equal(starts, expected)
    assert set(result.by_task()) <= {(4, 5), (5, 4)}
    assert np.all(result.optimal == LENGTH)  # both goals one step away
    write_adaptation_csv(tmp_path / "a.csv", {"random": result})
    assert len(open(tmp_path / "a.csv").read().splitlines()) == 1 + 5 * EPISODES
    plot_adaptation({"random": result}, tmp_path / "a.png")
    assert (tmp_path / "a.png").stat().st_size > 1000


def _one_good_arm_tasks(n_tasks: int, n_arms: int, rng: np.random.Generator) -> np.ndarray:
    probs = rng.uniform(0.0, 0.2, size=(n_tasks, n_arms))
    probs[np.arange(n_tasks), rng.integers(n_arms, size=n_tasks)] = rng.uniform(0.8, 1.0, size=n_tasks)
    return probs


def test_short_run_beats_random_on_held_out_bandits():
    arms, pulls, n_trials = 4, 8, 400
    rng = np.random.default_rng(0)
    train_tasks, test_tasks = _one_good_arm_tasks(1000, arms, rng), _one_good_arm_tasks(200, arms, rng)

    def envs(tasks, n, offset):
        return DummyVecEnv([lambda i=i: TrialWrapper(BernoulliBandit(arms, tasks), pulls, seed=offset + i) for i in range(n)])

    model = RL2(
        "MlpGruPolicy",
        envs(train_tasks, 16, 0),
        n_steps=2 * pulls,
        batch_size=16 * pulls,
        n_epochs=8,
        learning_rate=1e-2,
        ent_coef=0.01,
        policy_kwargs=dict(lstm_hidden_size=32, net_arch=[]),
        seed=0,
    )
    model.learn(15_000)
    result = evaluate_adaptation(model, envs(test_tasks, 20, 1000), n_trials, seed=0)
    trial_returns = result.returns.sum(axis=1)
    # A uniformly random policy's expected trial return on the held-out tasks, exactly.
    random_mean = pulls * test_tasks.mean()
    # Trials are independent and returns lie in [0, pulls]. For any policy whose expected return is
    # at most random_mean, Hoeffding gives P(mean of 400 trials >= random_mean + 1) <= exp(-2 * 400 / 8**2)
    # = exp(-12.5) < 4e-6, so clearing a margin of 1 cannot happen by chance.
    assert np.exp(-2 * n_trials * 1.0**2 / pulls**2) < 4e-6
    assert trial_returns.mean() > random_mean + 1.0
    # Adaptation: later pulls earn more than the first one, which is a guess.
    assert result.returns[:, -2:].mean() > result.returns[:, 0].mean() + 0.2
