import io

import numpy as np
import pytest

from sb3_pref.core.segments import SegmentBatch, SegmentStore

N_ENVS = 3


def make_stream(n_steps: int, episode_lengths: list) -> tuple:
    """
    A hand-built vectorised stream where every value encodes its origin: ``v = 1000 * env + t``.
    ``episode_lengths[e]`` lists the lengths env ``e`` cycles through (``None``: the episode never ends).
    Also returns the episode id of every transition, counted here independently of the store.
    """
    n_envs = len(episode_lengths)
    value = 1000.0 * np.arange(n_envs)[None, :] + np.arange(n_steps)[:, None]
    obs = np.stack([value, -value], axis=-1).astype(np.float32)
    actions = (value + 0.5)[..., None].astype(np.float32)
    rewards = (0.5 * value).astype(np.float32)
    dones = np.zeros((n_steps, n_envs), dtype=bool)
    episode = np.zeros((n_steps, n_envs), dtype=np.int64)
    for env, lengths in enumerate(episode_lengths):
        if lengths is None:
            continue
        t, episode_id, i = 0, 0, 0
        while t < n_steps:
            length = lengths[i % len(lengths)]
            episode[t : t + length, env] = episode_id
            if t + length - 1 < n_steps:
                dones[t + length - 1, env] = True
            t, episode_id, i = t + length, episode_id + 1, i + 1
    return obs, actions, rewards, dones, episode


def feed(store: SegmentStore, stream: tuple, chunks: list) -> None:
    obs, actions, rewards, dones, _ = stream
    begin = 0
    for size in chunks:
        end = begin + size
        store.add(obs[begin:end], actions[begin:end], rewards[begin:end], dones[begin:end])
        begin = end
    assert begin == len(obs)


def valid_starts(episode: np.ndarray, first_step: int, size_segment: int) -> set:
    """Brute force: every (env, start) whose H steps are stored and share one episode id."""
    n_steps, n_envs = episode.shape
    return {
        (env, s)
        for env in range(n_envs)
        for s in range(first_step, n_steps - size_segment + 1)
        if len(set(episode[s : s + size_segment, env])) == 1
    }


def check_contents(batch: SegmentBatch, episode: np.ndarray, size_segment: int) -> None:
    steps = batch.start[:, None] + np.arange(size_segment)
    value = 1000.0 * batch.env_index[:, None] + steps
    np.testing.assert_array_equal(batch.obs[..., 0], value)
    np.testing.assert_array_equal(batch.obs[..., 1], -value)
    np.testing.assert_array_equal(batch.actions[..., 0], value + 0.5)
    np.testing.assert_array_equal(batch.rewards, 0.5 * value)
    segment_episodes = episode[steps, batch.env_index[:, None]]
    assert np.all(segment_episodes == segment_episodes[:, :1])


def test_segments_lie_in_one_episode_and_cover_all_valid_starts() -> None:
    stream = make_stream(64, [[7], [3, 10, 5, 1], None])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=1000)
    feed(store, stream, [13, 1, 30, 20])
    assert len(store) == 64 * N_ENVS
    batch = store.sample(20_000, size_segment=4, rng=np.random.default_rng(0))
    assert batch.obs.shape == (20_000, 4, 2) and batch.actions.shape == (20_000, 4, 1)
    assert batch.features.shape == (20_000, 4, 3)
    check_contents(batch, stream[4], 4)
    expected = valid_starts(stream[4], 0, 4)
    drawn, counts = np.unique(np.stack([batch.env_index, batch.start], axis=1), axis=0, return_counts=True)
    assert {tuple(pair) for pair in drawn.tolist()} == expected
    # Uniform over valid starts: every count is near 20000 / len(expected).
    assert counts.min() > 0.6 * 20_000 / len(expected)
    assert store.max_piece_length == 64  # env 2 never ends an episode


def test_ring_overwrite_keeps_newest_and_never_spans_the_wrap() -> None:
    stream = make_stream(37, [[6], [4, 9], None])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=30)
    assert store.capacity_per_env == 10
    feed(store, stream, [5, 8, 3, 21])
    assert len(store) == 30
    batch = store.sample(5000, size_segment=3, rng=np.random.default_rng(1))
    assert batch.start.min() >= 27
    check_contents(batch, stream[4], 3)
    assert {(e, s) for e, s in zip(batch.env_index.tolist(), batch.start.tolist())} == valid_starts(stream[4], 27, 3)
    # The running episode of env 2 fills the whole ring: exactly one segment of the ring's length fits.
    whole = store.sample(50, size_segment=10, rng=np.random.default_rng(2))
    assert set(whole.env_index.tolist()) == {2} and set(whole.start.tolist()) == {27}
    obs, actions, rewards = store.last_transitions(4)
    np.testing.assert_array_equal(rewards, 0.5 * np.array([2035.0, 36.0, 1036.0, 2036.0]))
    assert obs.shape == (4, 2) and actions.shape == (4, 1)


def test_add_longer_than_ring_keeps_newest() -> None:
    stream = make_stream(25, [None, None, None])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=30)
    feed(store, stream, [2, 23])
    batch = store.sample(200, size_segment=10, rng=np.random.default_rng(3))
    assert set(batch.start.tolist()) == {15}
    check_contents(batch, stream[4], 10)


def test_partial_running_episode_yields_segments() -> None:
    stream = make_stream(6, [None, [2], None])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1)
    feed(store, stream, [6])
    batch = store.sample(100, size_segment=6, rng=np.random.default_rng(4))
    assert set(batch.env_index.tolist()) == {0, 2} and set(batch.start.tolist()) == {0}


def test_recent_episode_statistics_across_add_calls() -> None:
    stream = make_stream(40, [[7], [3, 10, 5, 1], None])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=60)  # ring smaller than the stream
    feed(store, stream, [6, 1, 11, 22])
    _, _, rewards, dones, episode = stream
    expected_returns, expected_lengths = [], []
    for t, env in zip(*np.nonzero(dones)):  # completion order: by step, then env
        steps = episode[: t + 1, env] == episode[t, env]
        expected_returns.append(rewards[: t + 1, env][steps].sum(dtype=np.float64))
        expected_lengths.append(steps.sum())
    np.testing.assert_array_equal(store.recent_episode_returns, expected_returns)
    np.testing.assert_array_equal(store.recent_episode_lengths, expected_lengths)
    assert store.recent_episode_lengths[:3].tolist() == [3, 7, 10]


def test_recent_episode_statistics_keep_last_100() -> None:
    stream = make_stream(300, [[2]])
    store = SegmentStore(1, obs_dim=2, act_dim=1, capacity=50)
    feed(store, stream, [150, 150])
    returns = store.recent_episode_returns
    assert len(returns) == 100
    # Episode i spans steps 2i and 2i + 1, with rewards t / 2: its return is 2i + 0.5.
    np.testing.assert_array_equal(returns, 2.0 * np.arange(50, 150) + 0.5)
    np.testing.assert_array_equal(store.recent_episode_lengths, np.full(100, 2))


def test_errors() -> None:
    with pytest.raises(ValueError, match="n_envs"):
        SegmentStore(0, obs_dim=2, act_dim=1)
    with pytest.raises(ValueError, match="capacity"):
        SegmentStore(2, obs_dim=2, act_dim=1, capacity=0)
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1)
    with pytest.raises(ValueError, match="empty"):
        store.sample(1, size_segment=2, rng=np.random.default_rng(0))
    obs, actions, rewards, dones, _ = make_stream(20, [[7], [3], [5]])
    with pytest.raises(ValueError, match="obs"):
        store.add(obs[:, :2], actions[:, :2], rewards[:, :2], dones[:, :2])
    with pytest.raises(ValueError, match="actions"):
        store.add(obs, actions[..., [0, 0]], rewards, dones)
    with pytest.raises(ValueError, match="dones"):
        store.add(obs, actions, rewards, dones[:-1])
    bad_rewards = rewards.copy()
    bad_rewards[3, 1] = np.nan
    with pytest.raises(ValueError, match="rewards"):
        store.add(obs, actions, bad_rewards, dones)
    assert len(store) == 0  # a rejected batch leaves no trace
    store.add(obs, actions, rewards, dones)
    with pytest.raises(ValueError, match=r"size_segment=8 .*longest: 7"):
        store.sample(1, size_segment=8, rng=np.random.default_rng(0))


def test_same_seed_same_segments_and_state_round_trip() -> None:
    stream = make_stream(50, [[7], [3, 10, 5, 1], [12, 4]])
    store = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=75)
    feed(store, tuple(array[:30] for array in stream), [10, 11, 9])  # 30 of 50 steps, so the ring (25 per env) has wrapped
    first = store.sample(64, size_segment=5, rng=np.random.default_rng(7))
    second = store.sample(64, size_segment=5, rng=np.random.default_rng(7))
    for name in ("obs", "actions", "rewards", "env_index", "start"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))

    buffer = io.BytesIO()
    np.savez(buffer, **store.state_dict())
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as archive:
        state = {name: archive[name] for name in archive.files}
    restored = SegmentStore(N_ENVS, obs_dim=2, act_dim=1, capacity=75)
    restored.load_state_dict(state)
    obs, actions, rewards, dones, _ = stream
    for target in (store, restored):
        # Both continue from the same running partial episodes.
        target.add(obs[30:], actions[30:], rewards[30:], dones[30:])
    assert len(restored) == len(store)
    np.testing.assert_array_equal(restored.recent_episode_returns, store.recent_episode_returns)
    np.testing.assert_array_equal(restored.recent_episode_lengths, store.recent_episode_lengths)
    original = store.sample(64, size_segment=5, rng=np.random.default_rng(8))
    copied = restored.sample(64, size_segment=5, rng=np.random.default_rng(8))
    for name in ("obs", "actions", "rewards", "env_index", "start"):
        np.testing.assert_array_equal(getattr(original, name), getattr(copied, name))
    check_contents(copied, stream[4], 5)
    for got, want in zip(restored.last_transitions(10), store.last_transitions(10)):
        np.testing.assert_array_equal(got, want)


def test_segment_batch_take() -> None:
    batch = SegmentBatch(
        obs=np.arange(24, dtype=np.float32).reshape(4, 3, 2),
        actions=np.ones((4, 3, 1), dtype=np.float32),
        rewards=np.arange(12, dtype=np.float32).reshape(4, 3),
        env_index=np.array([0, 1, 2, 3]),
        start=np.array([10, 11, 12, 13]),
    )
    sub = batch.take(np.array([3, 1]))
    assert len(sub) == 2
    np.testing.assert_array_equal(sub.start, [13, 11])
    np.testing.assert_array_equal(sub.obs, batch.obs[[3, 1]])
    np.testing.assert_array_equal(sub.features[..., 2], np.ones((2, 3)))


def test_extras_travel_with_their_transitions():
    store = SegmentStore(n_envs=2, obs_dim=1, act_dim=1, capacity=40)
    rng = np.random.default_rng(0)
    for chunk in range(3):
        t = chunk * 10 + np.arange(10)
        obs = np.stack([t, 1000 + t], axis=1)[..., None].astype(np.float32)
        dones = np.zeros((10, 2), dtype=bool)
        # The extra of (step t, env e) is (t, e, 0.5 * t): float64 values survive exactly.
        extras = {"state": np.stack(np.broadcast_arrays(t[:, None], np.arange(2)[None], 0.5 * t[:, None]), axis=-1)}
        store.add(obs, np.zeros((10, 2, 1)), np.zeros((10, 2)), dones, extras=extras)
    batch = store.sample(50, 5, rng)
    steps = batch.obs[..., 0] - 1000 * batch.env_index[:, None]
    np.testing.assert_array_equal(batch.extras["state"][..., 0], steps)
    np.testing.assert_array_equal(batch.extras["state"][..., 1], np.broadcast_to(batch.env_index[:, None], steps.shape))
    np.testing.assert_array_equal(batch.extras["state"][..., 2], 0.5 * steps)
    np.testing.assert_array_equal(batch.take([3, 1]).extras["state"], batch.extras["state"][[3, 1]])
    restored = SegmentStore(n_envs=2, obs_dim=1, act_dim=1, capacity=40)
    restored.load_state_dict(store.state_dict())
    again = restored.sample(50, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(again.extras["state"], store.sample(50, 5, np.random.default_rng(0)).extras["state"])
    with pytest.raises(ValueError, match="extras"):
        store.add(obs, np.zeros((10, 2, 1)), np.zeros((10, 2)), dones)
