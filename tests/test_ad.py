"""AD: history recording from real learners, the history file format, bad inputs, the model's context, save/load."""

import json
import zipfile

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.ad import (
    A2C_SEED_SETTINGS,
    AD,
    ADConfig,
    ADTransformer,
    Histories,
    HistoryRecorder,
    RecordHistoryCallback,
    collect_histories,
    first_success_views,
    make_a2c_learner,
    record_learner,
    resolve_precision,
)
from sb3_pref.ad.windows import reward_index
from sb3_pref.envs.darkroom import DarkRoom, darkroom_trials, split_goals

SMALL = dict(embed_dim=16, n_layers=1, n_heads=2, ff_dim=32, n_updates=5, batch_size=4, seed=0)
ROOM = dict(size=5, episode_length=6)
_MOVES = {0: (0, 1), 1: (0, -1), 2: (-1, 0), 3: (1, 0), 4: (0, 0)}


def small_histories(n_goals: int = 3, steps: int = 120) -> Histories:
    goals = [(0, 0), (4, 4), (1, 3), (3, 0)][:n_goals]
    return Histories.concatenate([record_learner(g, "qlearning", steps, seed=i, env_kwargs=ROOM) for i, g in enumerate(goals)])


def check_history_is_the_room(histories: Histories, row: int, goal: tuple[int, int], size: int, terminate: bool) -> None:
    """Replays a history against the room's rules: moves, rewards, episode ends and time steps."""
    cells = np.rint(histories.observations[row] * (size - 1)).astype(int)
    for t in range(histories.length):
        if histories.timesteps[row, t] == 0:
            assert tuple(cells[t]) == (size // 2, size // 2)  # every episode starts at the centre
        else:
            dx, dy = _MOVES[int(histories.actions[row, t - 1])]
            expected = np.clip(cells[t - 1] + (dx, dy), 0, size - 1)
            assert tuple(cells[t]) == tuple(expected)
            assert histories.timesteps[row, t] == histories.timesteps[row, t - 1] + 1
        dx, dy = _MOVES[int(histories.actions[row, t])]
        arrived = tuple(np.clip(cells[t] + (dx, dy), 0, size - 1)) == goal
        assert histories.rewards[row, t] == float(arrived)
        if terminate and arrived:
            assert histories.dones[row, t]


def test_a2c_with_the_seed_settings_records_whole_episodes_in_order():
    env = make_vec_env(DarkRoom, n_envs=4, seed=0, env_kwargs=dict(goals=[(1, 1)], terminate_on_goal=True, **ROOM))
    model = make_a2c_learner(env, seed=0, n_steps=5)
    assert isinstance(model.policy.optimizer, th.optim.Adam)
    assert model.policy.optimizer.defaults["eps"] == 1e-6 and model.vf_coef == 0.99 and model.ent_coef == 0.01
    assert model.learning_rate == A2C_SEED_SETTINGS["learning_rate"] == 1e-4 and model.max_grad_norm == 0.5
    callback = RecordHistoryCallback(max_steps=300)
    model.learn(2_000, callback=callback)
    assert callback.recorder.full and model.num_timesteps < 2_000  # stopped once full
    history = callback.recorder.to_histories((1, 1), 5)
    assert history.length == 300
    check_history_is_the_room(history, 0, (1, 1), 5, terminate=True)


def test_ppo_reward_is_recorded_with_the_env_reward_not_the_learned_one():
    env = make_vec_env(DarkRoom, n_envs=2, seed=0, env_kwargs=dict(goals=[(2, 3)], **ROOM))
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=6, mb_size=8, hidden_dim=16)
    model = PPO_REWARD(
        "MlpPolicy",
        env,
        reward_model=reward_model,
        teacher="oracle",
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        num_interaction=64,
        max_feed=16,
        unsuper_step=0,
        re_update=2,
        seed=0,
        policy_kwargs={"net_arch": [16]},
    )
    callback = RecordHistoryCallback(max_steps=150)
    model.learn(320, callback=callback)
    history = callback.recorder.to_histories((2, 3), 5)
    check_history_is_the_room(history, 0, (2, 3), 5, terminate=False)
    assert set(np.unique(history.rewards)) <= {0.0, 1.0}


def test_cheap_learner_improves_and_shuffling_keeps_the_data_but_not_the_trend():
    histories = small_histories(4, 600)
    for row, goal in enumerate([(0, 0), (4, 4), (1, 3), (3, 0)]):
        check_history_is_the_room(histories, row, goal, 5, terminate=False)
    returns = np.array([r[:80] for r in histories.episode_returns()])
    assert returns[:, -20:].mean() > returns[:, :10].mean() + 1.0  # Q-learning learns
    shuffled = histories.shuffled(np.random.default_rng(0))
    assert np.sort(shuffled.rewards, axis=1).tolist() == np.sort(histories.rewards, axis=1).tolist()
    assert sorted(shuffled.episode_returns()[0].tolist()) == sorted(histories.episode_returns()[0].tolist())
    flat = np.array([r[:80] for r in shuffled.episode_returns()])
    early, late = flat[:, :10].mean(), flat[:, -20:].mean()
    assert abs(late - early) < abs(returns[:, -20:].mean() - returns[:, :10].mean())


def test_subsampled_histories_keep_every_kth_whole_episode_in_order():
    histories = Histories.concatenate([small_histories(2, 600), small_histories(1, 450)])
    returns = histories.episode_returns()
    for stride, start in ((1, 0), (3, 0), (3, 2)):
        thinned = histories.subsampled(stride, start)
        for row in range(histories.n_histories):
            kept = returns[row][start::stride]
            np.testing.assert_array_equal(thinned.episode_returns()[row], kept)
            length = thinned.history_lengths[row]
            # whole episodes only: each starts at timestep 0 and ends with a done, none is cut
            starts = np.flatnonzero(thinned.timesteps[row, :length] == 0)
            assert len(starts) == len(kept) and thinned.dones[row, length - 1]
            assert np.all(thinned.timesteps[row, 1:length][~thinned.dones[row, : length - 1]] > 0)
        assert thinned.meta["episode_stride"] == stride and thinned.tasks.tolist() == histories.tasks.tolist()
    # a slow learner's progress in fewer transitions: a stride of 4 keeps about a quarter of them
    assert histories.subsampled(4).length < histories.length / 3
    with pytest.raises(ValueError, match="stride"):
        histories.subsampled(0)
    with pytest.raises(ValueError, match="start"):
        histories.subsampled(2, 2)
    with pytest.raises(ValueError, match="complete episodes"):
        histories.truncated(3).subsampled(1)


def _tagged_histories(returns_per_row: list[list[float]]) -> Histories:
    """Histories whose observations hold their episode's index, episode ``e`` lasting ``1 + e % 3`` steps."""
    rows = []
    for returns in returns_per_row:
        obs, rewards, dones, timesteps = [], [], [], []
        for episode, value in enumerate(returns):
            steps = 1 + episode % 3
            obs += [[episode, 0.0]] * steps
            rewards += [0.0] * (steps - 1) + [value]
            dones += [False] * (steps - 1) + [True]
            timesteps += list(range(steps))
        rows.append(
            Histories(
                np.array([obs]),
                np.zeros((1, len(obs))),
                np.array([rewards]),
                np.array([dones]),
                np.array([timesteps]),
                np.array([[len(rows), 0]]),
                5,
            )
        )
    return Histories.concatenate(rows)


def test_first_success_views_show_the_search_up_to_the_first_success_then_the_trained_learner():
    pattern = [0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1]
    histories = _tagged_histories([pattern, [0.0] * 9])  # the second learner never succeeds: it gives no view
    views = first_success_views(histories, n_starts=10, tail=3, tail_window=4, rng=np.random.default_rng(0))
    episodes = []
    for row in range(views.n_histories):
        length = views.history_lengths[row]
        firsts = views.timesteps[row, :length] == 0
        episodes.append(views.observations[row, :length, 0][firsts].astype(int).tolist())
        # whole episodes, each with its own return
        np.testing.assert_array_equal(views.episode_returns()[row], np.array(pattern)[episodes[-1]])
    # starts 0-7 (start 8's first success, episode 9, is inside the last 4 episodes); the first parts:
    first_parts = [[0, 1, 2], [1, 2], [2], [3, 4, 5, 6], [4, 5, 6], [5, 6], [6], [7]]
    assert [view[: len(part)] for view, part in zip(episodes, first_parts)] == first_parts
    for view, part in zip(episodes, first_parts):
        tail = view[len(part) :]
        assert len(tail) == 3 and tail == sorted(set(tail)) and min(tail) >= 8  # 3 of the last 4, in order
    assert views.tasks[:, 0].tolist() == [0] * 8 and views.meta["views"] == "first_success"
    again = first_success_views(histories, n_starts=10, tail=3, tail_window=4, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(again.observations, views.observations)  # the same generator, the same views
    tails = {tuple(view[-3:]) for view in episodes}
    assert len(tails) > 1  # tails are drawn per view
    with pytest.raises(ValueError, match="tail_window"):
        first_success_views(histories, 2, tail=5, tail_window=4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_starts"):
        first_success_views(histories, 0, tail=1, tail_window=4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="never reached their goals"):
        first_success_views(_tagged_histories([[0.0] * 5]), 2, tail=1, tail_window=2, rng=np.random.default_rng(0))


def test_noisy_expert_anneals_from_the_first_reward_when_asked():
    """``anneal_after_reward``: epsilon stays 1 (a random walk) until the goal is first found, then falls to 0."""
    room = dict(size=5, episode_length=8, terminate_on_goal=False)
    goal, steps, anneal = (0, 0), 160, 0.05  # a corner: a random walk of 8 steps rarely reaches it
    optimal = DarkRoom(**room).optimal_return(goal)
    first_found = {}
    for after_reward in (False, True):
        found = []
        for seed in range(40):
            history = record_learner(
                goal,
                "noisy_expert",
                steps,
                seed,
                env_kwargs=room,
                learner_kwargs=dict(anneal_fraction=anneal, anneal_after_reward=after_reward),
            )
            returns = history.episode_returns()[0]
            first = int(np.flatnonzero(returns > 0)[0]) if (returns > 0).any() else len(returns)
            found.append(first)
            first_step = int(np.flatnonzero(history.rewards[0] > 0)[0]) if first < len(returns) else steps
            # from the first episode that starts after epsilon reached 0, the expert's every episode is optimal
            later = np.arange(len(returns)) * room["episode_length"] >= first_step + 1 + anneal * steps
            assert np.all(returns[later] == optimal), (after_reward, seed, returns)
        first_found[after_reward] = np.array(found)
    assert first_found[False].max() <= 1  # the clock: epsilon is 0 after 8 steps, goal found or not
    assert first_found[True].mean() > 4  # a random walk: about 1 in 20 episodes reaches the corner


def test_history_file_round_trip_and_resume(tmp_path):
    out = str(tmp_path / "h.npz")
    first = collect_histories([(0, 0), (4, 4)], out, learner="qlearning", steps=90, env_kwargs=ROOM)
    loaded = Histories.load(out)
    for name in ("observations", "actions", "rewards", "dones", "timesteps", "tasks"):
        np.testing.assert_array_equal(getattr(first, name), getattr(loaded, name))
    assert loaded.meta["learner"] == "qlearning" and loaded.tasks.tolist() == [[0, 0], [4, 4]]
    # A third goal resumes: the two shards on disk are reused, not retrained.
    shard = tmp_path / "h.npz.parts" / "goal_0_0_learner_0.npz"
    before = shard.stat().st_mtime_ns
    again = collect_histories([(0, 0), (4, 4), (1, 3)], out, learner="qlearning", steps=90, env_kwargs=ROOM)
    assert shard.stat().st_mtime_ns == before and again.n_histories == 3
    np.testing.assert_array_equal(again.actions[:2], first.actions[:, : again.length])


def test_bad_history_files_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Histories.load(tmp_path / "missing.npz")
    corrupted = tmp_path / "corrupted.npz"
    small_histories(1, 60).save(corrupted)
    corrupted.write_bytes(corrupted.read_bytes()[:200])
    with pytest.raises(ValueError, match="corrupted"):
        Histories.load(corrupted)
    with pytest.raises(ValueError, match="corrupted"):
        AD(str(corrupted), **SMALL)
    empty = tmp_path / "empty.npz"
    np.savez(empty)
    with pytest.raises(ValueError, match="lacks"):
        Histories.load(empty)
    with pytest.raises(ValueError, match="no transitions"):
        nothing = np.zeros((0, 0))
        Histories(np.zeros((0, 0, 2)), nothing, nothing, nothing, nothing, np.zeros((0, 2)), 5)
    with pytest.raises(ValueError, match="no finished episode"):
        HistoryRecorder(1).to_histories((0, 0), 5)


def test_bad_ad_inputs_fail_before_training():
    histories = small_histories(2, 120)
    onehot = record_learner((0, 0), "qlearning", 60, env_kwargs=dict(observation="onehot", **ROOM))
    with pytest.raises(ValueError, match="mismatched spaces"):
        AD([histories, onehot], **SMALL)
    with pytest.raises(ValueError, match="shorter than one episode"):
        AD(histories, seq_len=5, **SMALL)
    with pytest.raises(ValueError, match="exceeds the history length"):
        AD(histories, seq_len=1000, **SMALL)
    onehot_trials = dict(split="test", episodes_per_trial=2, observation="onehot")
    wrong_env = make_vec_env(darkroom_trials, n_envs=1, env_kwargs=onehot_trials)
    with pytest.raises(ValueError, match="mismatched spaces"):
        AD(histories, env=wrong_env, seq_len=12, **SMALL)
    model = AD(histories, seq_len=12, **SMALL)
    with pytest.raises(ValueError, match="trial observation"):
        model.predict(np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="mismatched spaces"):
        model.set_histories(onehot)


def test_burn_in_trains_the_first_steps_only_on_windows_that_start_a_history(tmp_path):
    histories = small_histories(3, 400)  # 400 steps, windows of 12: a uniform start is 0 one time in 389
    model = AD(histories, seq_len=12, burn_in=5, **SMALL)
    for _ in range(20):
        trained = model.window_sampler.batch()[-1]
        assert not trained[:, :5].any() and trained[:, 5:].all()  # mid-history windows: no loss on the first 5 steps
    model = AD(histories, seq_len=12, burn_in=5, first_window_fraction=0.5, **{**SMALL, "batch_size": 400})
    _, starts = model.window_sampler.starts()
    assert 0.42 < float((starts == 0).float().mean()) < 0.58  # 400 draws of a fair coin: 4 standard deviations
    first_rows = model.window_sampler.batch()[-1].all(1)
    assert 0.42 < float(first_rows.float().mean()) < 0.58  # exactly the windows at a history's start train everywhere
    # saved with the model; a model without it keeps its window sequence (no extra draw)
    model.learn(2)
    model.save(tmp_path / "ad.zip")
    loaded = AD.load(tmp_path / "ad.zip")
    assert loaded.hyperparameters["burn_in"] == 5 and loaded.hyperparameters["first_window_fraction"] == 0.5
    plain, zero = AD(histories, seq_len=12, **SMALL), AD(histories, seq_len=12, first_window_fraction=0.0, **SMALL)
    assert all(th.equal(a, b) for a, b in zip(plain.window_sampler.starts(), zero.window_sampler.starts()))
    for bad in (dict(burn_in=12), dict(burn_in=-1), dict(first_window_fraction=1.5), dict(first_window_fraction="half")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            AD(histories, seq_len=12, **bad, **SMALL)


@pytest.mark.parametrize("recency_bias,token_layout", [(False, "triplet"), (True, "triplet"), (True, "transition")])
def test_predict_context_is_the_state_and_padding_changes_nothing(recency_bias, token_layout):
    histories = small_histories(2, 120)
    model = AD(histories, seq_len=18, recency_bias=recency_bias, token_layout=token_layout, **SMALL)
    env = make_vec_env(darkroom_trials, n_envs=2, seed=0, env_kwargs=dict(split="all", episodes_per_trial=3, **ROOM))
    obs = env.reset()
    state, starts = None, np.ones(2, bool)
    for _ in range(14):
        actions, state = model.predict(obs, state, starts)
        obs, _, dones, _ = env.step(actions)
        starts = dones
    c_obs, c_act, c_rew, c_ts, c_valid = state[:5]
    assert c_valid.sum(1).tolist() == [13, 13]  # 14 actions taken, the last one not yet rewarded
    assert c_ts[0, -13:].tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0]  # episodes of 6 steps
    # The logits of the last token do not depend on what sits in padded slots.
    context = (c_obs, c_act, reward_index(c_rew, model.reward_values), c_ts, c_valid)
    full = [th.as_tensor(np.concatenate([a, a[:, -1:]], 1)) for a in context]
    model.policy.eval()
    reference = model.policy(*full)[:, -1]
    noisy = [t.clone() for t in full]
    noisy[0][:, :3] = 7.0
    noisy[1][:, :3] = 4
    assert th.allclose(model.policy(*noisy)[:, -1], reference, atol=1e-5)
    # Episode start empties the context.
    _, fresh = model.predict(obs, state, np.ones(2, bool))
    assert fresh[4].sum() == 0


def test_one_token_per_transition_is_causal_and_sees_the_previous_action_and_reward():
    """Logits at step t depend on a_{t-1} and r_{t-1} but never on a_t (the target) or anything later."""
    config = ADConfig(
        obs_dim=2,
        n_actions=5,
        max_timestep=6,
        seq_len=10,
        embed_dim=16,
        n_layers=2,
        n_heads=2,
        ff_dim=32,
        attention_dropout=0.0,
        residual_dropout=0.0,
        recency_bias=True,
        token_layout="transition",
    )
    th.manual_seed(0)
    model = ADTransformer(config).eval()
    obs, actions = th.rand(1, 10, 2), th.randint(5, (1, 10))
    rewards, steps = th.randint(2, (1, 10)), th.arange(10)[None] % 6
    reference = model(obs, actions, rewards, steps)
    t = 4
    changed_action, changed_reward = actions.clone(), rewards.clone()
    changed_action[0, t] = (actions[0, t] + 1) % 5
    changed_reward[0, t] = 1 - rewards[0, t]
    for inputs in ((obs, changed_action, rewards, steps), (obs, actions, changed_reward, steps)):
        out = model(*inputs)
        assert th.allclose(out[:, : t + 1], reference[:, : t + 1], atol=1e-6)  # the past cannot see it
        assert (out[:, t + 1] - reference[:, t + 1]).abs().max() > 1e-4  # the next step does
    # Left padding: the first real step has no previous transition, as if the window began there.
    valid = th.arange(10)[None] >= 3
    padded = model(obs, actions, rewards, steps, valid)[:, 3:]
    assert th.allclose(padded, model(obs[:, 3:], actions[:, 3:], rewards[:, 3:], steps[:, 3:]), atol=1e-5)
    # Three tokens per transition cost nine times the attention: the layouts differ in tokens, not in outputs' shape.
    assert (
        ADTransformer(ADConfig(**{**config.to_dict(), "token_layout": "triplet"}))(obs, actions, rewards, steps).shape
        == reference.shape
    )
    with pytest.raises(ValueError, match="token_layout"):
        ADConfig(obs_dim=2, n_actions=5, max_timestep=6, token_layout="pairs")


def test_token_layout_is_saved_and_older_models_load_as_triplets(tmp_path):
    histories = small_histories(2, 120)
    model = AD(histories, seq_len=12, token_layout="transition", **SMALL).learn(2, log_interval=0)
    model.save(tmp_path / "ad.zip")
    loaded = AD.load(tmp_path / "ad.zip")
    assert loaded.config.token_layout == "transition"
    obs = np.zeros((2, loaded.trial_obs_dim), np.float32)
    model.policy.eval()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    # A file written before the option existed has no token_layout in its config: it is the seed's layout.
    triplet = AD(histories, seq_len=12, **SMALL)
    triplet.save(tmp_path / "old.zip")
    with zipfile.ZipFile(tmp_path / "old.zip") as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(files["config.json"])
    del header["config"]["token_layout"]
    files["config.json"] = json.dumps(header).encode()
    with zipfile.ZipFile(tmp_path / "old.zip", "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    assert AD.load(tmp_path / "old.zip").config.token_layout == "triplet"


def test_save_load_is_pickle_free_and_identical(tmp_path):
    histories = small_histories(2, 120)
    model = AD(histories, seq_len=12, **SMALL).learn(3, log_interval=1)
    path = tmp_path / "ad.zip"
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["config.json", "training.npz", "weights.npz"]
    loaded = AD.load(path)
    assert loaded.config == model.config and loaded.num_timesteps == 3
    obs = np.zeros((3, loaded.trial_obs_dim), np.float32)
    model._predict_rng, loaded._predict_rng = np.random.default_rng(1), np.random.default_rng(1)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    loaded.set_histories(histories)
    loaded.learn(2, reset_num_timesteps=False)
    assert loaded.num_timesteps == 5
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable AD model"):
        AD.load(tmp_path / "bad.zip")


def test_learn_logs_ad_keys_calls_callbacks_and_is_seeded(tmp_path):
    histories = small_histories(2, 120)

    class Count(BaseCallback):
        calls = 0

        def _on_step(self) -> bool:
            Count.calls += 1
            return self.num_timesteps < 4  # stop after 4 updates

    first = AD(histories, seq_len=12, **SMALL)
    first.set_logger(configure(str(tmp_path), ["csv"]))
    first.learn(10, callback=Count(), log_interval=2)
    assert Count.calls == 4 and first.num_timesteps == 4
    with open(tmp_path / "progress.csv") as handle:
        header, *rows = handle.read().split()
    assert {"ad/loss", "ad/accuracy", "ad/learning_rate", "ad/grad_norm", "time/updates"} <= set(header.split(","))
    assert len(rows) == 2  # dumped at updates 2 and 4
    second = AD(histories, seq_len=12, **SMALL)
    second.learn(4)
    for a, b in zip(first.policy.parameters(), second.policy.parameters()):
        assert th.equal(a, b)
    # The cosine schedule reaches the minimum at n_updates.
    assert first._learning_rate(0) == pytest.approx(3e-4) and first._learning_rate(5) == pytest.approx(2e-6)


def test_seed_preset_and_precision_choice():
    config = ADConfig(obs_dim=2, n_actions=5, max_timestep=20)
    assert (config.seq_len, config.embed_dim, config.n_layers, config.n_heads, config.ff_dim) == (256, 64, 4, 4, 2048)
    assert (config.attention_dropout, config.residual_dropout) == (0.5, 0.1)
    model = ADTransformer(config)
    tokens = th.zeros(2, 256, dtype=th.long)
    logits = model(th.zeros(2, 256, 2), tokens, tokens, tokens)
    assert logits.shape == (2, 256, 5)
    assert resolve_precision(th.device("cpu")) is False
    assert resolve_precision(th.device("cpu"), "bfloat16") is True
    with pytest.raises(ValueError, match="dtype"):
        resolve_precision(th.device("cpu"), "float16")


def test_ad_in_the_grid_runner_and_report(tmp_path):
    from sb3_pref.experiments.config import ConfigError, load_config
    from sb3_pref.experiments.report import write_report
    from sb3_pref.experiments.runner import run_grid

    tiny = dict(
        total_timesteps=4,
        learner="qlearning",
        learner_steps=120,
        max_history_steps=120,
        seq_len=30,
        embed_dim=16,
        n_layers=1,
        n_heads=2,
        ff_dim=32,
        batch_size=4,
        episodes_per_trial=3,
        eval_trials=4,
        size=5,
        episode_length=8,
        n_test=8,
    )
    with pytest.raises(ConfigError, match="learner must be one of"):
        load_config(dict(algorithms=["ad"], tasks=["darkroom"], seeds=1, hyperparameters={**tiny, "learner": "sac"}))
    with pytest.raises(ConfigError, match="none of the algorithms"):
        load_config(dict(algorithms=["ad"], tasks=["walker_walk"], seeds=1))
    # RL2 in the same grid: the report draws both algorithms' in-context curves on the task's one figure.
    rl2 = dict(
        total_timesteps=256,
        n_envs=2,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        hidden_size=16,
        episodes_per_trial=3,
        eval_trials=4,
    )
    config = load_config(
        dict(name="ad_tiny", algorithms={"ad": {}, "rl2": rl2}, tasks=["darkroom"], seeds=1, hyperparameters=tiny),
        output_dir=str(tmp_path / "grid"),
    )
    ad_run = next(run for run in config.runs() if run.algo == "ad")
    assert ad_run.hyperparameters["terminate_on_goal"] is True  # the seed's variant is the preset
    assert run_grid(config, workers=1, stream=None).ok
    run = tmp_path / "grid" / "ad" / "darkroom" / "seed0"
    assert Histories.load(run / "histories.npz").n_histories == 16  # 24 goals of the 5 x 5 room, 8 held out
    with open(run / "adaptation.csv") as handle:
        agents = {line.split(",")[0] for line in handle.read().splitlines()[1:]}
    assert agents == {"AD", "random (AD room)", "source learners", "search bound"}
    write_report(str(tmp_path / "grid"), str(tmp_path / "report"))
    assert (tmp_path / "report" / "adaptation_darkroom.png").exists()
    report = (tmp_path / "report" / "report.md").read_text()
    rows = {line.split("|")[2].strip() for line in report.splitlines() if line.startswith("| darkroom |")}
    assert {"AD", "RL2", "random", "random (AD room)", "source learners", "search bound"} <= rows


def test_evaluate_adaptation_plays_ad_and_rl2_on_the_same_trials():
    from sb3_pref.rl2 import RL2
    from sb3_pref.rl2.evaluation import evaluate_adaptation

    room = dict(size=5, episode_length=6, terminate_on_goal=True)
    goals = [(0, 0), (4, 4)]
    parts = [record_learner(g, "qlearning", 120, seed=i, env_kwargs=room) for i, g in enumerate(goals)]
    histories = Histories.concatenate(parts)
    trials = dict(split="test", n_test=8, episodes_per_trial=3, **room)
    ad = AD(histories, seq_len=18, **SMALL)
    rl2 = RL2(
        "MlpGruPolicy",
        make_vec_env(darkroom_trials, n_envs=2, env_kwargs=trials),
        n_steps=8,
        batch_size=16,
        policy_kwargs=dict(lstm_hidden_size=8),
        seed=0,
    )
    results = []
    for model in (ad, rl2, ad):
        env = make_vec_env(darkroom_trials, n_envs=3, seed=5, env_kwargs=trials)
        results.append(evaluate_adaptation(model, env, 6, seed=1))
    # The same held-out goals (each env's first two trials; rows come in order of completion).
    assert sorted(results[0].tasks) == sorted(results[1].tasks)
    assert set(results[0].tasks) <= set(split_goals(0, size=5, n_test=8)[1])
    assert results[0].returns.shape == results[1].returns.shape == (6, 3)
    assert np.all(results[0].optimal == 1.0) and np.all(results[1].optimal == 1.0)
    # AD's sampling has its own generator: a fresh model of the same seed plays the same trials identically.
    again = AD(histories, seq_len=18, **SMALL)
    env = make_vec_env(darkroom_trials, n_envs=3, seed=5, env_kwargs=trials)
    np.testing.assert_array_equal(evaluate_adaptation(again, env, 6, seed=1).returns, results[0].returns)


def test_device_argument_and_precision_on_cpu():
    histories = small_histories(2, 120)
    model = AD(histories, seq_len=12, device="cpu", dtype="bfloat16", **SMALL)
    assert model.device.type == "cpu" and model.use_bf16
    stats = model.learn(2, log_interval=0).train_step()  # bf16 autocast on the CPU still trains in finite numbers
    assert np.isfinite(stats["loss"]) and next(model.policy.parameters()).dtype == th.float32
    auto = AD(histories, seq_len=12, device="auto", **SMALL)
    assert auto.device.type == ("cuda" if th.cuda.is_available() else "cpu")
    assert auto.use_bf16 == (th.cuda.is_available() and th.cuda.is_bf16_supported())


def test_seed_darkroom_variant_split_and_bounds():
    from sb3_pref.ad.evaluation import learner_curve, search_curve
    from sb3_pref.envs.darkroom import AD_TEST_GOALS, all_goals

    train, test = split_goals(0, n_test=AD_TEST_GOALS)
    assert (len(train), len(test)) == (57, 23) and not set(train) & set(test) and (4, 4) not in train + test
    with pytest.raises(ValueError, match="n_test"):
        split_goals(0, n_test=80)
    room = DarkRoom(goals=[(3, 4)], terminate_on_goal=True)  # one step left of the centre (4, 4)
    room.reset(seed=0)
    _, reward, terminated, truncated, _ = room.step(2)  # left: onto (3, 4)
    assert (reward, terminated, truncated) == (1.0, True, False) and room.optimal_return((3, 4)) == 1.0
    assert DarkRoom().optimal_return((3, 4)) == 20.0  # the default variant: 21 - distance
    # The searcher that sweeps the room finds every goal within a few episodes, then goes straight to it.
    curve = search_curve(all_goals(5), 6, size=5, episode_length=6, terminate_on_goal=True).returns[0]
    assert np.all(np.diff(curve) >= 0) and curve[-1] == 1.0 and curve[0] < 0.6
    histories = small_histories(2, 200)
    source = learner_curve(histories, 5, optimal=[1.0, 1.0])
    np.testing.assert_array_equal(source.returns[0], histories.episode_returns()[0][:5])


def test_ad_improves_in_context_on_held_out_goals_and_beats_shuffled_histories():
    """
    The headline at a small scale (:data:`NOISY_ROOM` with 80 histories per goal, AD^epsilon on a 5 x 5 room): a
    model trained on histories of a learner that improves over the context improves from episode to episode on goals it
    never saw, with frozen weights; a model trained on the same histories with their episodes shuffled
    (the same data, no learning trend: behaviour cloning of a mixture of policies) does not.
    """
    from stable_baselines3.common.vec_env import DummyVecEnv

    from sb3_pref.ad.presets import NOISY_ROOM, short_histories
    from sb3_pref.rl2.evaluation import evaluate_adaptation

    room, episodes, n_trials = NOISY_ROOM["room"], NOISY_ROOM["episodes"], 384
    train_goals, test_goals = split_goals(0, size=room["size"], n_test=NOISY_ROOM["n_test"])
    # 80 histories per goal, not the preset's 20: with 20, an AVX512 EPYC's numerics gave a model at the edge of all
    # three bounds below (5.0, 4.0 and 2.1 standard errors); with 80 it clears them (8.1, 5.8, 3.7), while doubling
    # the updates on 20 did not (7.0, 4.1, 2.1): more distinct histories, not more passes, is what generalises
    histories = short_histories(train_goals, learners_per_goal=80, seed=0)
    assert histories.n_histories == 80 * len(train_goals) and histories.length == NOISY_ROOM["model"]["seq_len"]
    source = np.array(histories.episode_returns())
    assert source[:, -2:].mean() > source[:, 0].mean() + 4.0  # the improvement spans the context
    returns = {}
    for name, data in (("ordered", histories), ("shuffled", histories.shuffled(np.random.default_rng(0)))):
        model = AD(data, seed=0, **NOISY_ROOM["model"]).learn(log_interval=0)
        env = DummyVecEnv(
            [
                (lambda j=j: darkroom_trials("test", episodes, n_test=NOISY_ROOM["n_test"], seed=j, **room))
                for j in range(n_trials)
            ]
        )
        result = evaluate_adaptation(model, env, n_trials, seed=0)
        assert set(result.tasks) == set(test_goals)  # every held-out goal, and only those
        returns[name] = result.returns

    def gain(r: np.ndarray) -> tuple[float, float]:
        """In-context gain of each trial (mean of the last two episodes minus the first): mean, standard error."""
        g = r[:, -2:].mean(1) - r[:, 0]
        return g.mean(), g.std(ddof=1) / np.sqrt(len(g))

    (ad_gain, ad_se), (shuffled_gain, shuffled_se) = gain(returns["ordered"]), gain(returns["shuffled"])
    print({name: r.mean(0).round(2).tolist() for name, r in returns.items()}, ad_gain, ad_se, shuffled_gain, shuffled_se)
    # Measured with 80 histories per goal on an AVX512 EPYC: AD 0.34 -> 1.63, shuffled 0.73 -> 0.86; the gain is 8.1
    # standard errors, 5.8 above the control's, the last two episodes 3.7 apart (the preset's 20 histories per goal
    # gave 7-8 standard errors on another EPYC, benchmarks/ad/README.md). A model that does not learn in context (the
    # shuffled control, or equal gains) breaks the bounds below.
    # AD improves across in-context episodes, far beyond noise...
    assert ad_gain > 5 * ad_se, (ad_gain, ad_se)
    # ... and faster than the same data without its learning trend...
    assert ad_gain - shuffled_gain > 4 * np.hypot(ad_se, shuffled_se), (ad_gain, shuffled_gain)
    # ... so that it ends higher, though it starts lower (its histories start at epsilon = 1).
    late = {name: r[:, -2:].mean(1) for name, r in returns.items()}
    late_se = np.hypot(*(v.std(ddof=1) / np.sqrt(n_trials) for v in late.values()))
    assert late["ordered"].mean() - late["shuffled"].mean() > 2.5 * late_se, {k: v.mean() for k, v in late.items()}
