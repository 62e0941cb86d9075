"""Fixed-length segments cut from vectorised rollouts, kept in bounded per-env transition rings."""

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

# How many completed episodes feed the teacher's threshold statistics (B-Pref averages recent episodes).
N_RECENT_EPISODES = 100


@dataclass
class SegmentBatch:
    """
    ``N`` segments of ``H`` consecutive transitions, each from a single episode of a single env.

    :param obs: ``(N, H, obs_dim)`` float32 raw (never VecNormalize-d) observations
    :param actions: ``(N, H, act_dim)`` float32 encoded actions (one-hot for discrete)
    :param rewards: ``(N, H)`` float32 true rewards, what a scripted teacher judges
    :param env_index: ``(N,)`` int64, the env each segment came from
    :param start: ``(N,)`` int64, absolute step index (per env) of each segment's first transition
    :param extras: named per-step arrays ``(N, H, dim)`` recorded beside the transitions (for
        instance the simulator states a human teacher's videos are rendered from)
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    env_index: np.ndarray
    start: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def features(self) -> np.ndarray:
        """:return: ``concat(obs, actions)`` on the last axis, shape ``(N, H, obs_dim + act_dim)``"""
        return np.concatenate([self.obs, self.actions], axis=-1)

    def __len__(self) -> int:
        return len(self.obs)

    def take(self, indices: np.ndarray) -> "SegmentBatch":
        """
        :param indices: integer indices or a boolean mask over the ``N`` segments
        :return: the sub-batch, in the order of ``indices`` (copies, as numpy fancy indexing makes)
        """
        indices = np.asarray(indices)
        return SegmentBatch(
            obs=self.obs[indices],
            actions=self.actions[indices],
            rewards=self.rewards[indices],
            env_index=self.env_index[indices],
            start=self.start[indices],
            extras={name: values[indices] for name, values in self.extras.items()},
        )


class SegmentStore:
    """
    Keeps the newest transitions of every env of a ``VecEnv`` in preallocated rings and cuts
    fixed-length segments from them. Envs may end episodes at different times and episodes may
    differ in length: every stored slot carries an episode id, and a segment is only ever drawn
    from consecutive steps of one episode (a still-running episode counts). One ``VecEnv`` step
    adds one transition to every env, so a single write position serves all rings. Memory is
    bounded by ``capacity`` however long training runs.

    It also tracks the true returns and lengths of the last completed episodes, which the
    scripted teachers use for their adaptive thresholds.

    :param n_envs: number of envs of the ``VecEnv`` feeding the store
    :param obs_dim: flat observation size
    :param act_dim: flat (encoded) action size
    :param capacity: transitions kept over all envs; each env keeps ``max(1, capacity // n_envs)``
    """

    def __init__(self, n_envs: int, obs_dim: int, act_dim: int, capacity: int = 100_000) -> None:
        for name, value, minimum in (
            ("n_envs", n_envs, 1),
            ("obs_dim", obs_dim, 1),
            ("act_dim", act_dim, 0),
            ("capacity", capacity, 1),
        ):
            if not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        self.n_envs = int(n_envs)
        self.obs_dim = int(obs_dim)
        self.act_dim = int(act_dim)
        self.capacity = int(capacity)
        self.capacity_per_env = max(1, self.capacity // self.n_envs)
        shape = (self.n_envs, self.capacity_per_env)
        self._obs = np.zeros((*shape, self.obs_dim), dtype=np.float32)
        self._actions = np.zeros((*shape, self.act_dim), dtype=np.float32)
        self._rewards = np.zeros(shape, dtype=np.float32)
        self._episode = np.zeros(shape, dtype=np.int64)
        self._pos = 0  # next slot written, the same for every env
        self._size = 0  # slots filled per env
        self._n_steps = 0  # steps ever added per env: the absolute index of the next transition
        self._episode_counter = np.zeros(self.n_envs, dtype=np.int64)
        # Partial return/length of each env's running episode, carried across add() calls.
        self._partial_return = np.zeros(self.n_envs, dtype=np.float64)
        self._partial_length = np.zeros(self.n_envs, dtype=np.int64)
        self._recent_returns = np.zeros(0, dtype=np.float64)
        self._recent_lengths = np.zeros(0, dtype=np.int64)
        self._extras: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        """:return: transitions stored over all envs"""
        return self._size * self.n_envs

    @property
    def recent_episode_returns(self) -> np.ndarray:
        """:return: true returns of the last (up to 100) completed episodes, oldest first"""
        return self._recent_returns.copy()

    @property
    def recent_episode_lengths(self) -> np.ndarray:
        """:return: lengths of the last (up to 100) completed episodes, oldest first"""
        return self._recent_lengths.copy()

    def _chronological_slots(self, n_newest: int) -> np.ndarray:
        """:return: ring slots of the newest ``n_newest`` steps, oldest first"""
        return (self._pos - n_newest + np.arange(n_newest)) % self.capacity_per_env

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        """
        Append ``T`` steps of a vectorised rollout. If ``T`` exceeds the ring, only the newest steps
        are kept (the episode statistics still see all of them).

        :param obs: ``(T, n_envs, obs_dim)`` raw observations the actions were taken in
        :param actions: ``(T, n_envs, act_dim)`` encoded actions
        :param rewards: ``(T, n_envs)`` true rewards
        :param dones: ``(T, n_envs)``, True where the transition ended an episode (terminated or truncated)
        :param extras: named ``(T, n_envs, dim)`` arrays stored beside the transitions; their rings are
            allocated at the first add that brings them, and every later add must bring the same names
        """
        obs = np.asarray(obs, dtype=np.float32)
        actions = np.asarray(actions, dtype=np.float32)
        rewards = np.asarray(rewards, dtype=np.float64)
        dones = np.asarray(dones).astype(bool)
        n_steps = obs.shape[0] if obs.ndim > 0 else 0
        expected = {
            "obs": (obs, (n_steps, self.n_envs, self.obs_dim)),
            "actions": (actions, (n_steps, self.n_envs, self.act_dim)),
            "rewards": (rewards, (n_steps, self.n_envs)),
            "dones": (dones, (n_steps, self.n_envs)),
        }
        for name, (array, shape) in expected.items():
            if array.shape != shape or n_steps < 1:
                raise ValueError(f"{name} has shape {array.shape}, expected {shape} with T >= 1 (T taken from obs)")
        if not np.all(np.isfinite(rewards)):
            step, env = (int(i) for i in np.argwhere(~np.isfinite(rewards))[0])
            raise ValueError(
                f"rewards contains {rewards[step, env]} (true reward of env {env} at its step {self._n_steps + step}, "
                f"step {step} of this batch): the env must return finite rewards; fix or wrap the env"
            )
        extras = self._check_extras(extras or {}, n_steps)

        # Episode id of step t = the env's current id + dones strictly before t.
        done_counts = np.cumsum(dones, axis=0)
        episode = self._episode_counter[None, :] + done_counts - dones
        self._update_episode_stats(rewards, dones)
        self._episode_counter += done_counts[-1]

        keep = min(n_steps, self.capacity_per_env)
        # Row t of the batch belongs in slot (pos + t) % cap; only the last `keep` rows survive.
        slots = (self._pos + np.arange(n_steps - keep, n_steps)) % self.capacity_per_env
        self._obs[:, slots] = obs[-keep:].swapaxes(0, 1)
        self._actions[:, slots] = actions[-keep:].swapaxes(0, 1)
        self._rewards[:, slots] = rewards[-keep:].T
        self._episode[:, slots] = episode[-keep:].T
        for name, values in extras.items():
            self._extras[name][:, slots] = values[-keep:].swapaxes(0, 1)
        self._pos = (self._pos + n_steps) % self.capacity_per_env
        self._size = min(self._size + n_steps, self.capacity_per_env)
        self._n_steps += n_steps

    def _check_extras(self, extras: dict[str, np.ndarray], n_steps: int) -> dict[str, np.ndarray]:
        extras = {name: np.asarray(values, dtype=np.float64) for name, values in extras.items()}
        if self._n_steps == 0 and not self._extras:
            for name, values in extras.items():
                if values.ndim != 3:
                    raise ValueError(f"extras['{name}'] has shape {values.shape}, expected (T, n_envs, dim)")
                self._extras[name] = np.zeros((self.n_envs, self.capacity_per_env, values.shape[2]), dtype=np.float64)
        if set(extras) != set(self._extras):
            raise ValueError(f"extras has keys {sorted(extras)}, but this store records {sorted(self._extras)}")
        for name, values in extras.items():
            expected = (n_steps, self.n_envs, self._extras[name].shape[2])
            if values.shape != expected:
                raise ValueError(f"extras['{name}'] has shape {values.shape}, expected {expected}")
        return extras

    def _update_episode_stats(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        cumulative = np.cumsum(rewards, axis=0)
        last_done = np.full(self.n_envs, -1, dtype=np.int64)
        returns, lengths = [], []
        # np.nonzero walks row-major, so episodes are recorded in the order they ended.
        for t, env in zip(*np.nonzero(dones)):
            before = cumulative[last_done[env], env] if last_done[env] >= 0 else 0.0
            returns.append(self._partial_return[env] + cumulative[t, env] - before)
            lengths.append(self._partial_length[env] + t - last_done[env])
            self._partial_return[env] = 0.0
            self._partial_length[env] = 0
            last_done[env] = t
        envs = np.arange(self.n_envs)
        before = np.where(last_done >= 0, cumulative[np.maximum(last_done, 0), envs], 0.0)
        self._partial_return += cumulative[-1] - before
        self._partial_length += len(rewards) - 1 - last_done
        if returns:
            self._recent_returns = np.concatenate([self._recent_returns, returns])[-N_RECENT_EPISODES:]
            self._recent_lengths = np.concatenate([self._recent_lengths, np.asarray(lengths, dtype=np.int64)])[
                -N_RECENT_EPISODES:
            ]

    @property
    def max_piece_length(self) -> int:
        """:return: the longest run of stored consecutive steps of one episode (0 when empty)"""
        if self._size == 0:
            return 0
        episode = self._episode[:, self._chronological_slots(self._size)]
        run_starts = np.ones(episode.shape, dtype=bool)
        run_starts[:, 1:] = episode[:, 1:] != episode[:, :-1]
        # Every env row opens a run, so runs never straddle two envs in the flattened view.
        starts = np.flatnonzero(run_starts.ravel())
        return int(np.diff(np.append(starts, run_starts.size)).max())

    def fits(self, size_segment: int) -> bool:
        """:return: whether some stored episode piece is at least ``size_segment`` steps long (a segment can be cut)"""
        return self.max_piece_length >= size_segment

    def sample(
        self, n: int, size_segment: int, rng: np.random.Generator, recent_episodes: Optional[int] = None
    ) -> SegmentBatch:
        """
        Draw ``n`` segments uniformly, with replacement, among all valid start positions: every
        stored ``(env, step)`` whose next ``size_segment`` steps are stored and lie in one episode.

        :param n: number of segments
        :param size_segment: segment length ``H``
        :param rng: the random generator (the store holds no randomness of its own)
        :param recent_episodes: draw only from the newest this many stored episodes of all envs, by the step each
            last reached (running episodes are the newest); those without a piece of ``size_segment`` steps are
            skipped for older ones (QPA's policy-aligned queries). None: every stored episode
        :return: the segments
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if size_segment < 1:
            raise ValueError(f"size_segment must be >= 1, got {size_segment}")
        if self._size == 0:
            raise ValueError("the segment store is empty: add rollout transitions before sampling segments")
        n_starts = self._size - size_segment + 1
        valid = np.zeros((self.n_envs, 0), dtype=bool)
        if n_starts > 0:
            # Episode ids never decrease in time, so equal ids at both ends mean one episode throughout.
            episode = self._episode[:, self._chronological_slots(self._size)]
            valid = episode[:, :n_starts] == episode[:, size_segment - 1 :]
            if recent_episodes is not None:
                valid &= self._newest_episodes(episode, valid, recent_episodes)[:, :n_starts]
        candidates = np.flatnonzero(valid)
        if len(candidates) == 0:
            raise ValueError(
                f"size_segment={size_segment} is longer than every stored episode piece "
                f"(longest: {self.max_piece_length} steps); lower size_segment or collect more steps"
            )
        chosen = candidates[rng.integers(len(candidates), size=n)]
        env_index, offset = np.divmod(chosen, n_starts)
        oldest_slot = self._pos - self._size
        slots = (oldest_slot + offset[:, None] + np.arange(size_segment)) % self.capacity_per_env
        rows = env_index[:, None]
        return SegmentBatch(
            obs=self._obs[rows, slots],
            actions=self._actions[rows, slots],
            rewards=self._rewards[rows, slots],
            env_index=env_index.astype(np.int64),
            start=(self._n_steps - self._size + offset).astype(np.int64),
            extras={name: ring[rows, slots] for name, ring in self._extras.items()},
        )

    @staticmethod
    def _newest_episodes(episode: np.ndarray, valid: np.ndarray, k: int) -> np.ndarray:
        """
        :param episode: ``(n_envs, size)`` episode ids of the stored steps, oldest first
        :param valid: ``(n_envs, n_starts)`` start positions whose segment lies in one episode
        :param k: how many episodes to keep
        :return: ``(n_envs, size)`` mask of the steps of the ``k`` newest episodes that hold a valid start
        """
        if k < 1:
            raise ValueError(f"recent_episodes must be >= 1 (or None for all episodes), got {k}")
        n_envs, size = episode.shape
        # Runs of one episode id along each env's row; every row opens a run, so runs never straddle two envs.
        run_start = np.ones(episode.shape, dtype=bool)
        run_start[:, 1:] = episode[:, 1:] != episode[:, :-1]
        run_id = np.cumsum(run_start.ravel()) - 1
        n_runs = int(run_id[-1]) + 1
        last_step = np.zeros(n_runs, dtype=np.int64)
        np.maximum.at(last_step, run_id, np.tile(np.arange(size), n_envs))
        usable = np.zeros(n_runs, dtype=bool)
        starts = np.zeros(episode.shape, dtype=bool)
        starts[:, : valid.shape[1]] = valid
        usable[run_id[starts.ravel()]] = True
        # Newest first by the step each episode last reached; ties (envs ending together) by env order.
        order = np.lexsort((np.arange(n_runs), -last_step))
        keep = np.zeros(n_runs, dtype=bool)
        keep[order[usable[order]][:k]] = True
        return keep[run_id].reshape(episode.shape)

    def last_transitions(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """
        The newest transitions, e.g. to normalise a reward model's output on recent data.

        :param n: maximum number of transitions
        :return: ``(obs, actions, rewards)`` copies of shape ``(m, obs_dim)``, ``(m, act_dim)``, ``(m,)``
            with ``m = min(n, len(self))``, in time order (envs interleaved within a step)
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        n = min(n, len(self))
        n_newest_steps = -(-n // self.n_envs)
        slots = self._chronological_slots(n_newest_steps)
        obs = self._obs[:, slots].swapaxes(0, 1).reshape(-1, self.obs_dim)
        actions = self._actions[:, slots].swapaxes(0, 1).reshape(-1, self.act_dim)
        rewards = self._rewards[:, slots].T.reshape(-1)
        start = len(rewards) - n
        return obs[start:], actions[start:], rewards[start:]

    def state_dict(self) -> dict[str, np.ndarray]:
        """:return: the store's full state as numpy arrays only (safe for ``np.savez``, no pickle)"""
        slots = self._chronological_slots(self._size)
        return {
            "n_envs": np.asarray(self.n_envs),
            "obs_dim": np.asarray(self.obs_dim),
            "act_dim": np.asarray(self.act_dim),
            "obs": self._obs[:, slots],
            "actions": self._actions[:, slots],
            "rewards": self._rewards[:, slots],
            "episode": self._episode[:, slots],
            "n_steps": np.asarray(self._n_steps, dtype=np.int64),
            "episode_counter": self._episode_counter.copy(),
            "partial_return": self._partial_return.copy(),
            "partial_length": self._partial_length.copy(),
            "recent_returns": self._recent_returns.copy(),
            "recent_lengths": self._recent_lengths.copy(),
            **{f"extra/{name}": ring[:, slots] for name, ring in self._extras.items()},
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """
        Restore a state saved by :meth:`state_dict`. The stored steps are laid out oldest first; if
        this store's ring is smaller than the saved one, only the newest steps are kept.

        :param state: the saved state; ``n_envs``, ``obs_dim`` and ``act_dim`` must match this store
        """
        for name in ("n_envs", "obs_dim", "act_dim"):
            if int(state[name]) != getattr(self, name):
                raise ValueError(f"state has {name}={int(state[name])}, this store has {getattr(self, name)}")
        size = min(int(state["obs"].shape[1]), self.capacity_per_env)
        self._extras = {
            key[len("extra/") :]: np.zeros((self.n_envs, self.capacity_per_env, state[key].shape[2]), dtype=np.float64)
            for key in state
            if key.startswith("extra/")
        }
        for name, ring in self._extras.items():
            ring[:, :size] = state[f"extra/{name}"][:, -size:] if size > 0 else 0.0
        if size > 0:
            self._obs[:, :size] = state["obs"][:, -size:]
            self._actions[:, :size] = state["actions"][:, -size:]
            self._rewards[:, :size] = state["rewards"][:, -size:]
            self._episode[:, :size] = state["episode"][:, -size:]
        self._size = size
        self._pos = size % self.capacity_per_env
        self._n_steps = int(state["n_steps"])
        self._episode_counter = np.array(state["episode_counter"], dtype=np.int64)
        self._partial_return = np.array(state["partial_return"], dtype=np.float64)
        self._partial_length = np.array(state["partial_length"], dtype=np.int64)
        self._recent_returns = np.array(state["recent_returns"], dtype=np.float64)
        self._recent_lengths = np.array(state["recent_lengths"], dtype=np.int64)
