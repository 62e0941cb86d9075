"""k-nearest-neighbour state-entropy reward for unsupervised pretraining (PrefPPO / PEBBLE)."""

from typing import Optional, Union

import numpy as np
import torch as th
from stable_baselines3.common.running_mean_std import RunningMeanStd

# Only guards against division by zero when every distance seen so far is the same.
_STD_EPS = 1e-8
# Extra neighbours re-ranked on exact distances after the fast (matmul) ranking.
_CANDIDATE_MARGIN = 8


class StateEntropyReward:
    """
    Intrinsic reward that favours visiting new states: the distance from each observation to its
    ``k``-th nearest neighbour among recently stored observations (a particle estimate of state
    entropy), divided by a running standard deviation of those distances. The reward is scaled but
    deliberately not mean-centred, so it stays positive.

    Differences from the original PrefPPO/PEBBLE code:

    - it runs once per rollout batch, not once per env step: the whole batch is added to the buffer
      first, so observations of the same batch count as each other's neighbours;
    - the running std uses SB3's :class:`RunningMeanStd` (the original's parallel-variance update
      had a bug that mis-scaled the reward);
    - observations are the raw ones (never VecNormalize-d) and any device works, CPU included.

    :param obs_dim: flat observation size
    :param capacity: observations kept in the neighbour buffer (oldest overwritten)
    :param k: which neighbour's distance is the reward (the point itself is not counted)
    :param device: where the buffer lives and distances are computed
    :param max_chunk_bytes: upper bound on the size of one block of query-to-buffer distances;
        queries are processed in chunks to respect it (at least one query per chunk)
    """

    def __init__(
        self,
        obs_dim: int,
        capacity: int,
        k: int = 5,
        device: Union[str, th.device] = "cpu",
        max_chunk_bytes: int = 64 * 2**20,
    ) -> None:
        for name, value in (("obs_dim", obs_dim), ("capacity", capacity), ("k", k), ("max_chunk_bytes", max_chunk_bytes)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.obs_dim = int(obs_dim)
        self.capacity = int(capacity)
        self.k = int(k)
        self.device = th.device(device)
        self.max_chunk_bytes = int(max_chunk_bytes)
        self.buffer = th.zeros((self.capacity, self.obs_dim), dtype=th.float32, device=self.device)
        self.pos = 0  # next row written
        self.size = 0
        # A tiny prior count: SB3's default (1e-4 of a sample with mean 0, var 1) would bias the
        # variance by about 1e-4 * mean**2, which is large for distances whose mean dwarfs their std.
        self.distance_stats = RunningMeanStd(epsilon=1e-12, shape=())
        # Each stored row's distances to its k nearest other rows, ascending (inf where fewer exist), kept up to date
        # by add() once score_rows() has built it: PEBBLE scores a batch against the whole set at every gradient
        # step, and a lookup is a few hundred times cheaper than a batch-to-set k-NN. Only valid while no row
        # was overwritten (a neighbour list may name a row that is gone): _overwritten switches it off.
        self._neighbours: Optional[th.Tensor] = None
        self._overwritten = False

    def _as_tensor(self, obs: np.ndarray, name: str = "obs") -> th.Tensor:
        array = np.asarray(obs, dtype=np.float32)
        if array.ndim != 2 or array.shape[1] != self.obs_dim:
            raise ValueError(f"{name} has shape {array.shape}, expected (n, {self.obs_dim})")
        return th.as_tensor(array, device=self.device)

    def add(self, obs: np.ndarray) -> None:
        """
        Store observations, overwriting the oldest once full (if more than ``capacity`` rows are
        given, only the last ``capacity`` are kept).

        :param obs: ``(n, obs_dim)`` raw observations
        """
        rows = self._as_tensor(obs)[-self.capacity :]
        index = (self.pos + th.arange(len(rows), device=self.device)) % self.capacity
        self.buffer[index] = rows
        old_size = self.size
        self.pos = (self.pos + len(rows)) % self.capacity
        self.size = min(self.size + len(rows), self.capacity)
        if old_size + len(rows) > self.capacity:
            self._overwritten, self._neighbours = True, None
        elif self._neighbours is not None:
            self._update_neighbours(old_size)

    def _update_neighbours(self, begin: int) -> None:
        """
        Bring the neighbour lists up to date after rows ``begin..size`` were appended: each new row's list over
        the rows before it and its own chunk, and the new distances merged into the lists of earlier rows, so
        that every pair is counted once. Exact distances (no matmul ranking): one new row costs ``size x obs_dim``.
        """
        assert self._neighbours is not None
        stored = self.buffer[: self.size]
        chunk = max(1, self.max_chunk_bytes // max(1, self.size * self.obs_dim * stored.element_size()))
        for start in range(begin, self.size, chunk):
            stop = min(start + chunk, self.size)
            new = stored[start:stop]
            distances = (stored[None, :stop] - new[:, None]).norm(dim=-1)  # (new rows, rows up to this chunk)
            own = th.arange(stop - start, device=self.device)
            distances[own, start + own] = float("inf")  # a row is not its own neighbour
            n_nearest = min(self.k, stop)
            self._neighbours[start:stop, :n_nearest] = th.topk(distances, n_nearest, dim=1, largest=False).values
            if start == 0:
                continue
            # Earlier rows whose lists the new rows enter: merge, keeping the k smallest.
            candidates = distances[:, :start].T  # (earlier rows, new rows)
            closer = th.nonzero((candidates < self._neighbours[:start, -1:]).any(dim=1)).squeeze(1)
            if len(closer) > 0:
                merged = th.cat([self._neighbours[closer], candidates[closer]], dim=1)
                self._neighbours[closer] = th.topk(merged, self.k, dim=1, largest=False).values

    @th.no_grad()
    def knn_distance(self, obs: np.ndarray) -> np.ndarray:
        """
        Distance from each query to its ``k``-th nearest stored neighbour, the query itself excluded.
        Queries are assumed to be stored already, so exactly one zero self-distance is skipped by
        taking the ``(k + 1)``-th smallest distance over the buffer; duplicates of a query (other
        rows at distance 0) still count as neighbours. While fewer than ``k + 1`` rows are stored,
        the largest distance available is used.

        :param obs: ``(n, obs_dim)`` raw observations
        :return: ``(n,)`` float32 distances
        """
        queries = self._as_tensor(obs)
        if self.size == 0:
            raise ValueError("the neighbour buffer is empty: add observations before querying distances")
        stored = self.buffer[: self.size]
        n_neighbours = min(self.k + 1, self.size)
        bytes_per_query = self.size * stored.element_size()
        chunk = max(1, self.max_chunk_bytes // bytes_per_query)
        # Candidates are ranked by |s|^2 - 2 q.s (the squared distance less the query's own |q|^2, which
        # does not change a row's order) in one matmul, whose rounding can swap near-equal neighbours; the
        # (k + 1)-th smallest is then taken over exact distances to a few more candidates than needed,
        # so the result equals the exact k-NN distance unless rounding moves a row past that margin.
        n_candidates = min(n_neighbours + _CANDIDATE_MARGIN, self.size)
        # Distances do not change under a shift; centring keeps the matmul's rounding small for
        # observations far from the origin (|s|^2 would otherwise dwarf the distances).
        # The exact distances below use the raw rows, so the result does not depend on the centre's rounding.
        centre = stored.mean(dim=0)
        stored_centred, queries_centred = stored - centre, queries - centre
        stored_sq = (stored_centred * stored_centred).sum(dim=1)[None]
        distances = []
        for begin in range(0, len(queries), chunk):
            block = queries[begin : begin + chunk]
            approx = th.addmm(stored_sq, queries_centred[begin : begin + chunk], stored_centred.T, alpha=-2.0)
            candidates = th.topk(approx, n_candidates, dim=1, largest=False).indices
            exact = (stored[candidates] - block[:, None, :]).norm(dim=-1)
            distances.append(th.topk(exact, n_neighbours, dim=1, largest=False).values[:, -1])
        if not distances:
            return np.zeros(0, dtype=np.float32)
        return th.cat(distances).cpu().numpy().astype(np.float32)

    @property
    def distance_std(self) -> float:
        """:return: the running std of all distances seen by :meth:`compute`"""
        return float(np.sqrt(self.distance_stats.var))

    def compute(self, obs: np.ndarray) -> np.ndarray:
        """
        Add a rollout batch, then reward each observation with its k-NN distance over the running std.

        :param obs: ``(n, obs_dim)`` raw observations (e.g. a flattened rollout buffer)
        :return: ``(n,)`` float32 rewards
        """
        self.add(obs)
        return self.score(obs)

    def score(self, obs: np.ndarray) -> np.ndarray:
        """
        Reward already stored observations (PEBBLE scores each sampled batch against the buffer):
        their k-NN distances, added to the running std, over that std.

        :param obs: ``(n, obs_dim)`` raw observations, stored before
        :return: ``(n,)`` float32 rewards
        """
        return self._scaled(self.knn_distance(obs))

    def _scaled(self, distances: np.ndarray) -> np.ndarray:
        """Add k-NN distances to the running statistics, then divide them by the running std."""
        if len(distances) > 0:
            self.distance_stats.update(distances.astype(np.float64))
        return (distances / max(self.distance_std, _STD_EPS)).astype(np.float32)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        """
        :meth:`score` of stored rows given by index (the order of :meth:`add`), from neighbour lists kept up to
        date as rows are added: the same distances, without a k-NN search per call. The lists are built at the
        first call (one pass over all pairs). Falls back to :meth:`score` once a row has been overwritten.

        :param rows: ``(n,)`` indices of stored rows, each in ``[0, size)``
        :return: ``(n,)`` float32 rewards
        """
        index = th.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)
        if len(index) > 0 and (int(index.min()) < 0 or int(index.max()) >= self.size):
            raise ValueError(f"rows must be in [0, {self.size}), got {int(index.min())}..{int(index.max())}")
        if self._overwritten:
            return self.score(self.buffer[index].cpu().numpy())
        if self._neighbours is None:
            self._neighbours = th.full((self.capacity, self.k), float("inf"), device=self.device)
            self._update_neighbours(0)
        # knn_distance's semantics: the k-th nearest other row, or the farthest one while fewer than k exist.
        column = min(self.k, self.size - 1) - 1
        if column < 0:  # a single stored row
            distances = np.zeros(len(index), dtype=np.float32)
        else:
            distances = self._neighbours[index, column].cpu().numpy().astype(np.float32)
        return self._scaled(distances)

    def state_dict(self) -> dict[str, np.ndarray]:
        """:return: buffer (oldest first) and running statistics as numpy arrays only"""
        order = (self.pos - self.size + np.arange(self.size)) % self.capacity
        return {
            "buffer": self.buffer[th.as_tensor(order, device=self.device)].cpu().numpy(),
            "stats_mean": np.asarray(self.distance_stats.mean, dtype=np.float64),
            "stats_var": np.asarray(self.distance_stats.var, dtype=np.float64),
            "stats_count": np.asarray(self.distance_stats.count, dtype=np.float64),
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """
        Restore a state from :meth:`state_dict` (the buffer is laid out oldest first; if it holds more
        rows than this instance's capacity, the newest are kept).

        :param state: the saved state
        """
        stored = np.asarray(state["buffer"], dtype=np.float32)
        if stored.ndim != 2 or stored.shape[1] != self.obs_dim:
            raise ValueError(f"state['buffer'] has shape {stored.shape}, expected (n, {self.obs_dim})")
        self.pos, self.size, self._neighbours, self._overwritten = 0, 0, None, False
        self.add(stored)
        self.distance_stats.mean = np.asarray(state["stats_mean"], dtype=np.float64)
        self.distance_stats.var = np.asarray(state["stats_var"], dtype=np.float64)
        self.distance_stats.count = float(state["stats_count"])
