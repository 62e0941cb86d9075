"""QPA's policy-aligned queries and hybrid replay (issue 44): where the pairs and the batches come from."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.utils import set_random_seed

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel, ScriptedTeacher
from sb3_pref.common.replay_samplers import RecentHalfSampler
from sb3_pref.core.segments import SegmentStore
from sb3_pref.core.teachers import N_STREAMS, REPLAY_STREAM
from sb3_pref.experiments.flags import build_parser


def two_env_store(rewards=None) -> SegmentStore:
    """Env 0 ends an episode every 10 steps, env 1 every 25; 60 steps each; obs = (env, step); rewards 0 if not given."""
    store = SegmentStore(n_envs=2, obs_dim=2, act_dim=1, capacity=400)
    steps = np.arange(60)
    obs = np.stack([np.stack([np.full(60, env), steps], axis=-1) for env in (0, 1)], axis=1).astype(np.float32)
    dones = np.zeros((60, 2), dtype=bool)
    dones[9::10, 0] = True
    dones[24::25, 1] = True
    store.add(obs, np.zeros((60, 2, 1)), np.zeros((60, 2)) if rewards is None else rewards, dones)
    return store


def episodes_drawn(store: SegmentStore, size_segment: int, recent: int, n: int = 4000) -> dict[tuple[int, int], int]:
    batch = store.sample(n, size_segment, np.random.default_rng(0), recent_episodes=recent)
    length = {0: 10, 1: 25}
    keys = [(int(env), int(start) // length[int(env)]) for env, start in zip(batch.env_index, batch.start)]
    ends = [(int(env), int(start) // length[int(env)]) for env, start in zip(batch.env_index, batch.start + size_segment - 1)]
    assert keys == ends  # every segment lies in one episode
    return {key: keys.count(key) for key in set(keys)}


def test_segments_come_from_the_newest_episodes_by_the_step_they_last_reached():
    store = two_env_store()
    # The newest by last step: env 0's episode 5 and env 1's running episode 2 (both at step 59, env order breaks
    # the tie), then env 0's episode 4 and env 1's episode 1 (both ended at step 49).
    assert set(episodes_drawn(store, 5, recent=1)) == {(0, 5)}
    assert set(episodes_drawn(store, 5, recent=2)) == {(0, 5), (1, 2)}
    assert set(episodes_drawn(store, 5, recent=4)) == {(0, 5), (1, 2), (0, 4), (1, 1)}
    # Uniform over the valid starts of the chosen episodes: 6 starts in a 10-step episode, 6 in env 1's 10 running
    # steps, so each gets half (binomial sd 32 over 4000 draws).
    counts = episodes_drawn(store, 5, recent=2)
    assert abs(counts[(0, 5)] - 2000) < 160
    # Episodes with no piece long enough are passed over for older ones: env 1's running episode (10 steps) and all
    # of env 0's cannot hold 12 steps, so the newest two that can are env 1's episodes 1 and 0.
    assert set(episodes_drawn(store, 12, recent=2)) == {(1, 1), (1, 0)}
    assert len(episodes_drawn(store, 5, recent=None)) == 9  # every episode of both envs (6 + 3) holds 5 steps


def test_recent_episodes_must_be_positive():
    with pytest.raises(ValueError, match="recent_episodes must be >= 1"):
        two_env_store().sample(3, 5, np.random.default_rng(0), recent_episodes=0)


class RecordingTeacher(ScriptedTeacher):
    """The oracle, noting each round's segment starts and how far the run had come (steps per env)."""

    def __init__(self) -> None:
        super().__init__(beta=-1)
        self.rounds: list[tuple[int, np.ndarray]] = []
        self.store: SegmentStore = None

    def label_pairs(self, seg_0, seg_1) -> np.ndarray:
        self.rounds.append((self.store._n_steps, np.concatenate([seg_0.start, seg_1.start])))
        return super().label_pairs(seg_0, seg_1)


def query_starts(**options) -> tuple[PPO_REWARD, RecordingTeacher]:
    env = gym.make("Pendulum-v1")  # 200-step episodes, one env
    teacher = RecordingTeacher()
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=20, mb_size=16, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=200, batch_size=100, n_epochs=1, reward_model=reward_model, teacher=teacher,
        max_feed=64, num_interaction=400, unsuper_step=0, unsuper_flag=0, seed=0, device="cpu", **options,
    )  # fmt: skip
    teacher.store = model.pref_learner.store
    model.learn(2000)
    return model, teacher


def test_policy_aligned_queries_draw_only_from_the_last_episodes_and_uniformly():
    model, teacher = query_starts(qpa_episodes=2)
    assert model.feed_type == "uniform"  # QPA's draw when feed_type is left unset
    late = [(steps, starts) for steps, starts in teacher.rounds if steps >= 1000]
    assert len(late) >= 2
    for steps, starts in late:
        # Rounds fall at episode ends: the newest two episodes are the last 400 steps.
        assert starts.min() >= steps - 400, (steps, starts.min())
    # Without QPA the same rounds reach back to the start of the run.
    _, plain = query_starts(feed_type="uniform")
    assert min(starts.min() for steps, starts in plain.rounds if steps >= 1000) < 600


def test_hybrid_replay_draws_half_of_each_batch_from_the_newest_rows():
    env = gym.make("Pendulum-v1")
    buffer = ReplayBuffer(1000, env.observation_space, env.action_space, device="cpu")
    for step in range(700):
        obs = np.full((1, 3), step, dtype=np.float32)
        buffer.add(obs, obs + 1, np.zeros((1, 1)), np.array([float(step)]), np.array([False]), [{}])
    sampler = RecentHalfSampler(buffer, recent_rows=50, rng=np.random.default_rng(0))
    set_random_seed(0)  # SB3 draws its half with numpy's global generator
    rewards = sampler.sample(2000).rewards.squeeze(1).numpy()
    uniform, recent = rewards[:1000], rewards[1000:]
    assert recent.min() >= 650 and recent.max() == 699  # the newest 50 rows only
    assert uniform.min() < 50 and abs(uniform.mean() - 349.5) < 25  # SB3's own draw over all 700 rows
    assert sampler.buffer_size == 1000  # everything else is the buffer's
    assert len(sampler.sample(1).rewards) == 1  # an odd batch keeps its size: the uniform half gets the extra one
    with pytest.raises(ValueError, match="recent_rows must be >= 1"):
        RecentHalfSampler(buffer, 0, np.random.default_rng(0))


def qpa_sac_model() -> SAC_REWARD:
    """SAC_REWARD with QPA on 100-step Pendulum episodes: rounds of 20 labels every 200 steps, the last 2 episodes."""
    env = gym.make("Pendulum-v1", max_episode_steps=100)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=20, mb_size=20, seed=0)
    return SAC_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=40, num_interaction=200,
        unsuper_step=0, learning_starts=100, batch_size=32, policy_kwargs=dict(net_arch=[32, 32]), qpa_episodes=2,
        seed=0, device="cpu",
    )  # fmt: skip


def test_sac_reward_uses_the_hybrid_replay_while_labels_remain(monkeypatch):
    model = qpa_sac_model()
    updates: list[tuple[int, int]] = []  # (labels left, newest rows of the hybrid half or 0) per SAC update
    sample = RecentHalfSampler.sample
    train = model.train

    def sample_spy(self, batch_size, env=None):
        updates[-1] = (updates[-1][0], self.recent_rows)
        return sample(self, batch_size, env)

    def train_spy(*args, **kwargs):
        updates.append((model.pref_learner.budget_left, 0))
        return train(*args, **kwargs)

    monkeypatch.setattr(RecentHalfSampler, "sample", sample_spy)
    model.train = train_spy
    model.learn(600)
    assert model.pref_learner.total_feed == 40
    # Rounds at 200 and 400 steps spend the budget: hybrid batches between them, plain ones once it is spent.
    with_labels_left = {rows for left, rows in updates if 0 < left < 40}
    spent = {rows for left, rows in updates if left == 0}
    assert with_labels_left == {200}  # the last two 100-step episodes of the one env: 200 rows
    assert spent == {0} and len(updates) > 150
    assert th.isfinite(next(model.critic.parameters())).all()


def test_the_option_is_checked_and_has_a_flag():
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=20, mb_size=20)
    with pytest.raises(ValueError, match="qpa_episodes must be >= 0"):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, qpa_episodes=-1)
    args = build_parser("x").parse_args(["--qpa-episodes", "10"])
    assert args.qpa_episodes == 10


def test_a_saved_run_draws_on_where_the_hybrid_replay_left_off(tmp_path):
    model = qpa_sac_model()
    model.learn(300)  # a round at 200 steps, then hybrid batches: the writer's generator has drawn
    fresh = np.random.default_rng(np.random.SeedSequence(0).spawn(N_STREAMS)[REPLAY_STREAM])
    assert model._reward_writer._generator().bit_generator.state != fresh.bit_generator.state
    model.save(tmp_path / "qpa")
    loaded = SAC_REWARD.load(tmp_path / "qpa", env=model.get_env())
    # The next recent-half rows are the ones the uninterrupted run would draw, not the seed's first ones again.
    expected = model._reward_writer._generator().integers(1_000_000, size=8)
    np.testing.assert_array_equal(loaded._reward_writer._generator().integers(1_000_000, size=8), expected)


def test_the_agreement_diagnostic_can_be_read_where_the_policy_is_now():
    """``oracle_agreement(..., recent_episodes=N)`` scores pairs drawn from the newest N episodes only."""
    from sb3_pref.core import pair_draws

    store = two_env_store(np.random.default_rng(3).normal(size=(60, 2)))  # an untrained model ranks these at about chance
    model = RewardModel(2, 1, size_segment=5, seed=0)

    def by_hand(recent):
        seg_0, seg_1 = pair_draws.draw_pairs(store, 200, 5, np.random.default_rng(1), recent)
        true_0, true_1 = seg_0.rewards.sum(1), seg_1.rewards.sum(1)
        assert recent is None or set(seg_0.env_index.tolist() + seg_1.env_index.tolist()) == {0}
        labels = np.where(true_0 == true_1, np.nan, (true_1 > true_0).astype(np.float64))  # ties left out (a segment
        # drawn twice: one episode of 6 starts)
        return model.preference_accuracy(seg_0.features, seg_1.features, labels)

    recent = pair_draws.oracle_agreement(store, model, 200, np.random.default_rng(1), recent_episodes=1)
    everywhere = pair_draws.oracle_agreement(store, model, 200, np.random.default_rng(1))
    assert recent == by_hand(1) and everywhere == by_hand(None) and recent != everywhere
