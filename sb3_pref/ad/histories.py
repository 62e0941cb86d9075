"""
Learning histories for Algorithm Distillation: what a single-task learner saw and did, in order,
over its whole training run.

A :class:`Histories` holds ``N`` histories (one per learner, usually one learner per training goal)
as plain ``(N, T)`` arrays, history ``i`` filling its first ``lengths[i]`` columns (histories of
unequal length are padded at the end, never cut), and is stored as a compressed, versioned ``.npz`` that
is read back with ``allow_pickle=False``. :class:`HistoryRecorder` turns the steps of a vectorised
learner into one history: each env's episodes are appended whole, in the order they finish, so the
history runs episode after episode at the learner's own pace. :class:`RecordHistoryCallback` feeds
it from any SB3 algorithm (A2C, PPO, DQN, ``PPO_REWARD``...).
"""

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any, Optional, Union, cast

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

#: version of the ``.npz`` layout; :meth:`Histories.load` refuses other versions
HISTORY_FORMAT_VERSION = 2
#: versions :meth:`Histories.load` reads (version 1 files have no ``lengths``: every history is full)
READABLE_VERSIONS = (1, 2)
_ARRAYS = ("observations", "actions", "rewards", "dones", "timesteps", "tasks")


@dataclass
class Histories:
    """
    ``N`` learning histories of up to ``T`` transitions, row ``t`` being ``(obs_t, action_t, reward_t)``.

    :param observations: ``(N, T, obs_dim)`` float32, the observation the action was taken in
    :param actions: ``(N, T)`` int64 discrete actions
    :param rewards: ``(N, T)`` float32 rewards the env returned
    :param dones: ``(N, T)`` bool, True on the last step of an episode
    :param timesteps: ``(N, T)`` int64 step index of ``obs_t`` inside its episode (0 at a reset)
    :param tasks: ``(N, task_dim)`` float64, the task each learner trained on (DarkRoom: its goal)
    :param n_actions: size of the discrete action space
    :param meta: free JSON-serialisable description (learner, env, steps per learner...)
    :param lengths: ``(N,)`` transitions of each history; the columns after them are padding
        (None: every history is ``T`` long)
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    timesteps: np.ndarray
    tasks: np.ndarray
    n_actions: int
    meta: dict[str, Any] = field(default_factory=dict)
    lengths: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        self.observations = np.asarray(self.observations, dtype=np.float32)
        self.actions = np.asarray(self.actions, dtype=np.int64)
        self.rewards = np.asarray(self.rewards, dtype=np.float32)
        self.dones = np.asarray(self.dones, dtype=bool)
        self.timesteps = np.asarray(self.timesteps, dtype=np.int64)
        tasks = np.asarray(self.tasks, dtype=np.float64)
        self.tasks = tasks if tasks.ndim == 2 else tasks.reshape(tasks.shape[0], -1)
        self.n_actions = int(self.n_actions)
        full = np.full(self.actions.shape[:1], self.actions.shape[1] if self.actions.ndim == 2 else 0, dtype=np.int64)
        self.lengths = full if self.lengths is None else np.asarray(self.lengths, dtype=np.int64)
        self.validate()

    @property
    def n_histories(self) -> int:
        return int(self.actions.shape[0])

    @property
    def length(self) -> int:
        """Transitions of the longest history (the arrays' width ``T``)."""
        return int(self.actions.shape[1])

    @property
    def min_length(self) -> int:
        """Transitions of the shortest history."""
        return int(self.history_lengths.min())

    @property
    def history_lengths(self) -> np.ndarray:
        """``(N,)`` transitions of each history (typed access to ``lengths``)."""
        assert self.lengths is not None  # set in __post_init__
        return self.lengths

    def valid(self) -> np.ndarray:
        """``(N, T)`` True on recorded transitions, False on the padding after a shorter history."""
        return np.arange(self.length) < self.history_lengths[:, None]

    @property
    def obs_dim(self) -> int:
        return int(self.observations.shape[2])

    @property
    def max_episode_length(self) -> int:
        """Longest episode in the histories (its number of steps)."""
        return int(self.timesteps.max()) + 1

    def validate(self) -> None:
        """:raises ValueError: if the arrays are empty or their shapes and values disagree"""
        if self.observations.ndim != 3:
            raise ValueError(f"observations must be (N, T, obs_dim), got shape {self.observations.shape}")
        n, t = self.observations.shape[:2]
        if n == 0 or t == 0:
            raise ValueError(f"histories hold no transitions (shape {self.observations.shape}): record a learner first")
        for name in ("actions", "rewards", "dones", "timesteps"):
            if getattr(self, name).shape != (n, t):
                raise ValueError(f"{name} must have shape {(n, t)} like observations, got {getattr(self, name).shape}")
        lengths = self.history_lengths
        if lengths.shape != (n,) or lengths.min() < 1 or lengths.max() > t:
            raise ValueError(f"lengths must be ({n},) values in [1, {t}], got {lengths!r}")
        if self.tasks.shape[0] != n:
            raise ValueError(f"tasks must have one row per history ({n}), got {self.tasks.shape[0]}")
        if self.n_actions < 1 or self.actions.min() < 0 or self.actions.max() >= self.n_actions:
            raise ValueError(
                f"actions must lie in [0, n_actions={self.n_actions}), got [{self.actions.min()}, {self.actions.max()}]"
            )
        if self.timesteps.min() < 0:
            raise ValueError("timesteps must be >= 0")

    def check_compatible(self, other: "Histories") -> None:
        """:raises ValueError: when ``other`` has another observation width or action count"""
        if (self.obs_dim, self.n_actions) != (other.obs_dim, other.n_actions):
            raise ValueError(
                f"histories of mismatched spaces: obs_dim {self.obs_dim} / {other.obs_dim}, "
                f"n_actions {self.n_actions} / {other.n_actions}; record all histories on the same env"
            )

    def episode_returns(self) -> list[np.ndarray]:
        """Return of each complete episode of each history, in order (the source learner's curve)."""
        out = []
        for row, length in enumerate(self.history_lengths):
            ends = np.flatnonzero(self.dones[row, :length])
            sums = np.cumsum(self.rewards[row, :length], dtype=np.float64)[ends]
            out.append(np.diff(np.concatenate([[0.0], sums])))
        return out

    def truncated(self, max_steps: int) -> "Histories":
        """The first ``max_steps`` transitions of every history (the seed cuts at 800k)."""
        if max_steps >= self.length:
            return self
        return Histories(
            self.observations[:, :max_steps],
            self.actions[:, :max_steps],
            self.rewards[:, :max_steps],
            self.dones[:, :max_steps],
            self.timesteps[:, :max_steps],
            self.tasks,
            self.n_actions,
            {**self.meta, "truncated_to": int(max_steps)},
            np.minimum(self.history_lengths, max_steps),
        )

    def shuffled(self, rng: np.random.Generator) -> "Histories":
        """
        The same episodes with their order permuted inside each history: the same data without the
        learning trend, what a behaviour-cloning baseline sees. A trailing unfinished episode stays last.
        """
        arrays = {name: getattr(self, name).copy() for name in ("observations", "actions", "rewards", "dones", "timesteps")}
        for row, length in enumerate(self.history_lengths):
            ends = np.flatnonzero(self.dones[row, :length]) + 1
            starts = np.concatenate([[0], ends[:-1]])
            order = rng.permutation(len(ends))
            tail = np.arange(ends[-1] if len(ends) else 0, self.length)  # an unfinished episode, then padding
            index = np.concatenate([np.arange(starts[i], ends[i]) for i in order] + [tail])
            for name, values in arrays.items():
                values[row] = getattr(self, name)[row][index]
        meta = {**self.meta, "shuffled": True}
        return Histories(**arrays, tasks=self.tasks, n_actions=self.n_actions, meta=meta, lengths=self.history_lengths)

    def subsampled(self, stride: int, start: int = 0) -> "Histories":
        """
        Every ``stride``-th complete episode of each history, in order, starting at episode ``start``: a slow
        learner's progress over ``stride`` times as many episodes in the same number of transitions, so that
        a model's context spans more of it (a trailing unfinished episode is dropped).

        :param stride: keep one episode in ``stride`` (1 keeps every complete episode)
        :param start: index of the first kept episode, in ``[0, stride)``
        :return: new histories; a history with no episode kept is an error
        """
        if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1:
            raise ValueError(f"stride must be an int >= 1, got {stride!r}")
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start < stride:
            raise ValueError(f"start must be an int in [0, stride={stride}), got {start!r}")
        valid = self.valid()
        # episode index of every transition; the steps after a history's last done belong to no complete episode
        episode = np.cumsum(self.dones, axis=1) - self.dones
        complete = episode < (self.dones & valid).sum(axis=1, keepdims=True)
        keep = valid & complete & (episode % stride == start)
        lengths = keep.sum(axis=1)
        if lengths.min() == 0:
            empty = np.flatnonzero(lengths == 0).tolist()
            raise ValueError(f"histories {empty} hold fewer than {start + 1} complete episodes: nothing to keep")
        width = int(lengths.max())
        arrays = {}
        for name in ("observations", "actions", "rewards", "dones", "timesteps"):
            values = getattr(self, name)
            out = np.zeros((self.n_histories, width, *values.shape[2:]), dtype=values.dtype)
            for row in range(self.n_histories):
                out[row, : lengths[row]] = values[row][keep[row]]
            arrays[name] = out
        meta = {**self.meta, "episode_stride": int(stride), "episode_start": int(start)}
        return Histories(**arrays, tasks=self.tasks, n_actions=self.n_actions, meta=meta, lengths=lengths)

    @staticmethod
    def concatenate(parts: list["Histories"]) -> "Histories":
        """
        Stack histories of the same spaces, keeping every transition: shorter histories are padded at
        the end (zeros, never sampled: ``lengths`` records where each one stops).
        """
        if not parts:
            raise ValueError("concatenate needs at least one Histories")
        for part in parts[1:]:
            parts[0].check_compatible(part)
        width = max(part.length for part in parts)

        def padded(part: "Histories", name: str) -> np.ndarray:
            array = getattr(part, name)
            if name == "tasks" or array.shape[1] == width:
                return cast(np.ndarray, array)
            pad = [(0, 0), (0, width - array.shape[1])] + [(0, 0)] * (array.ndim - 2)
            return np.pad(array, pad)

        stacked = {name: np.concatenate([padded(part, name) for part in parts]) for name in _ARRAYS}
        lengths = np.concatenate([part.history_lengths for part in parts])
        meta = {**parts[0].meta, "n_parts": len(parts)}
        return Histories(**stacked, n_actions=parts[0].n_actions, meta=meta, lengths=lengths)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a compressed ``.npz`` (arrays plus a JSON header), atomically, without pickle."""
        header = {"format_version": HISTORY_FORMAT_VERSION, "n_actions": self.n_actions, "meta": self.meta}
        tmp = f"{os.fspath(path)}.tmp.npz"
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        np.savez_compressed(tmp, header=np.array(json.dumps(header)), lengths=self.history_lengths, **arrays)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Histories":
        """
        :param path: a file written by :meth:`save`
        :return: the histories
        :raises FileNotFoundError: for a missing file; ValueError for a corrupted, empty or foreign one
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"history file {os.fspath(path)!r} does not exist: produce it with `python -m sb3_pref.ad`"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [name for name in ("header", *_ARRAYS) if name not in data.files]
                if missing:
                    raise ValueError(f"history file {os.fspath(path)!r} lacks {missing}: not written by Histories.save")
                header = json.loads(str(data["header"]))
                arrays = {name: data[name] for name in _ARRAYS}
                lengths = data["lengths"] if "lengths" in data.files else None
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, json.JSONDecodeError) as error:
            raise ValueError(
                f"history file {os.fspath(path)!r} is corrupted or not an .npz ({error}); record it again"
            ) from error
        if header.get("format_version") not in READABLE_VERSIONS:
            raise ValueError(
                f"history file {os.fspath(path)!r} has format version {header.get('format_version')!r}, "
                f"this library reads versions {READABLE_VERSIONS}"
            )
        return cls(**arrays, n_actions=header["n_actions"], meta=header.get("meta", {}), lengths=lengths)


class HistoryRecorder:
    """
    Builds one learning history from the steps of ``n_envs`` parallel envs of one task. Steps are
    buffered per env; an episode joins the history when it finishes, so episodes are whole and in
    the order the learner finished them. An unfinished episode at the end is dropped.

    :param n_envs: number of parallel envs
    :param max_steps: stop recording after this many transitions (None: no limit)
    """

    def __init__(self, n_envs: int, max_steps: Optional[int] = None) -> None:
        self.n_envs = int(n_envs)
        self.max_steps = max_steps
        self._pending: list[list[tuple[np.ndarray, int, float, int]]] = [[] for _ in range(self.n_envs)]
        self._steps_in_episode = np.zeros(self.n_envs, dtype=np.int64)
        self._rows: list[tuple[np.ndarray, int, float, bool, int]] = []

    @property
    def n_recorded(self) -> int:
        """Transitions in finished episodes so far."""
        return len(self._rows)

    @property
    def full(self) -> bool:
        return self.max_steps is not None and self.n_recorded >= self.max_steps

    def add(self, observations: np.ndarray, actions: np.ndarray, rewards: np.ndarray, dones: np.ndarray) -> None:
        """
        Record one vectorised step.

        :param observations: ``(n_envs, ...)`` the observations the actions were taken in
        :param actions: ``(n_envs,)`` discrete actions
        :param rewards: ``(n_envs,)`` rewards
        :param dones: ``(n_envs,)`` whether each env's episode ended with this step
        """
        observations = np.asarray(observations, dtype=np.float32).reshape(self.n_envs, -1)
        actions = np.asarray(actions).reshape(self.n_envs)
        for i in range(self.n_envs):
            self._pending[i].append((observations[i], int(actions[i]), float(rewards[i]), int(self._steps_in_episode[i])))
            self._steps_in_episode[i] += 1
            if dones[i]:
                last = len(self._pending[i]) - 1
                self._rows.extend((o, a, r, j == last, t) for j, (o, a, r, t) in enumerate(self._pending[i]))
                self._pending[i] = []
                self._steps_in_episode[i] = 0

    def to_histories(self, task: Any, n_actions: int, meta: Optional[dict[str, Any]] = None) -> Histories:
        """:return: the recorded history (cut at ``max_steps``) as a one-row :class:`Histories`"""
        rows = self._rows[: self.max_steps] if self.max_steps is not None else self._rows
        if not rows:
            raise ValueError("the recorder holds no finished episode: train the learner for longer")
        obs, actions, rewards, dones, timesteps = (np.asarray(column) for column in zip(*rows))
        return Histories(
            obs[None],
            actions[None],
            rewards[None],
            dones[None],
            timesteps[None],
            np.asarray(task, dtype=np.float64).reshape(1, -1),
            n_actions,
            dict(meta or {}),
        )


class RecordHistoryCallback(BaseCallback):
    """
    Records an SB3 learner's history into a :class:`HistoryRecorder`: the observation each action was
    taken in, the action, the env's own reward (the original one under ``VecNormalize``, and never a
    learned reward, so a ``PPO_REWARD`` learner is recorded as the env saw it) and the episode end.
    Stops training once the recorder is full.

    :param recorder: where to record; None builds one for the training env
    :param max_steps: the recorder's limit when it is built here
    """

    def __init__(self, recorder: Optional[HistoryRecorder] = None, max_steps: Optional[int] = None, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.recorder = recorder
        self.max_steps = max_steps
        self._last_obs: Optional[np.ndarray] = None

    def _on_training_start(self) -> None:
        if self.recorder is None:
            self.recorder = HistoryRecorder(self.training_env.num_envs, self.max_steps)
        self._vec_normalize = self.training_env if isinstance(self.training_env, VecNormalize) else None
        last = self.model._last_obs  # the observation the first action is taken in
        self._last_obs = self._raw(last)

    def _raw(self, obs: Any) -> np.ndarray:
        if self._vec_normalize is not None:
            return cast(np.ndarray, self._vec_normalize.get_original_obs())  # DarkRoom's Box observations
        return np.asarray(obs)

    def _on_step(self) -> bool:
        assert self.recorder is not None
        rewards = self.locals["rewards"]
        if self._vec_normalize is not None:
            rewards = self._vec_normalize.get_original_reward()
        actions = self.locals.get("clipped_actions", self.locals["actions"])
        assert self._last_obs is not None  # set in _on_training_start
        self.recorder.add(self._last_obs, actions, rewards, self.locals["dones"])
        # After a done, new_obs already holds the next episode's first observation.
        self._last_obs = self._raw(self.locals["new_obs"])
        return not self.recorder.full
