"""
Checkpoints that a resumed run can trust.

SB3's ``CheckpointCallback`` saves at the end of a step, which for the preference algorithms is
before the rollout's query round and reward-model update: a run resumed from it asks that round
again. It also writes the ``.zip`` in place, so a process killed mid-write leaves a torn newest
file. :class:`AtomicCheckpointCallback` saves at the start of a rollout instead (after the previous
rollout's query round, relabelling and policy update, so a checkpoint holds exactly the steps that
were trained on), and writes every file aside, flushes it to disk, then renames it into place.
"""

import os
import re
from dataclasses import dataclass
from typing import Optional

from stable_baselines3.common.callbacks import BaseCallback

from sb3_pref.core.checks import check_int


@dataclass(frozen=True)
class Checkpoint:
    """A saved model and, when the run normalises observations, its ``VecNormalize`` statistics."""

    step: int
    model: str
    vecnormalize: Optional[str]


def _fsync_replace(temporary: str, path: str) -> None:
    with open(temporary, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def list_checkpoints(folder: str, name_prefix: str = "ckpt") -> list[Checkpoint]:
    """
    :param folder: where :class:`AtomicCheckpointCallback` saves
    :param name_prefix: its ``name_prefix``
    :return: the complete checkpoints in ``folder``, newest first (leftover ``.tmp`` files are ignored)
    """
    pattern = re.compile(rf"^{re.escape(name_prefix)}_(\d+)\.zip$")
    found = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        match = pattern.match(name)
        if match:
            statistics = os.path.join(folder, f"{name_prefix}_{match.group(1)}_vecnormalize.pkl")
            model = os.path.join(folder, name)
            found.append(Checkpoint(int(match.group(1)), model, statistics if os.path.exists(statistics) else None))
    return sorted(found, key=lambda checkpoint: -checkpoint.step)


class AtomicCheckpointCallback(BaseCallback):
    """
    Save the model every ``save_freq`` env steps (summed over envs, as ``num_timesteps`` counts them)
    at the start of a rollout, atomically, as ``<save_path>/<name_prefix>_<num_timesteps>.zip``, with
    the ``VecNormalize`` statistics beside it when the env has them. Resume with
    ``Algo.load(list_checkpoints(save_path)[0].model, env=env)`` and ``learn(..., reset_num_timesteps=False)``.

    :param save_freq: env steps between checkpoints (a checkpoint is written at the first rollout
        start at least ``save_freq`` steps after the previous one)
    :param save_path: folder of the checkpoints (created if needed)
    :param name_prefix: file name prefix
    :param keep: keep only the newest ``keep`` checkpoints (None keeps all)
    :param save_vecnormalize: also save the ``VecNormalize`` statistics, when there are any
    :param verbose: 1 prints a line per checkpoint
    """

    def __init__(
        self,
        save_freq: int,
        save_path: str,
        name_prefix: str = "ckpt",
        keep: Optional[int] = None,
        save_vecnormalize: bool = True,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.save_freq = check_int("save_freq", save_freq, 1, 10_000)
        self.keep = None if keep is None else check_int("keep", keep, 1, 2)
        if not isinstance(save_path, (str, os.PathLike)):
            raise TypeError(f"save_path must be a folder path, got a {type(save_path).__name__}")
        self.save_path = os.fspath(save_path)
        self.name_prefix = name_prefix
        self.save_vecnormalize = save_vecnormalize
        self._last_saved = 0

    def _on_training_start(self) -> None:
        self._last_saved = self.num_timesteps

    def _on_rollout_start(self) -> None:
        if self.num_timesteps - self._last_saved >= self.save_freq:
            self.save_checkpoint()
            self._last_saved = self.num_timesteps

    def _on_step(self) -> bool:
        return True

    def save_checkpoint(self) -> str:
        """Write a checkpoint now; :return: the model file's path"""
        os.makedirs(self.save_path, exist_ok=True)
        base = os.path.join(self.save_path, f"{self.name_prefix}_{self.num_timesteps}")
        vec_normalize = self.model.get_vec_normalize_env()
        # Statistics first, model last: a checkpoint counts once its model file exists, and each file
        # appears whole (written aside, flushed to disk, then renamed).
        if self.save_vecnormalize and vec_normalize is not None:
            vec_normalize.save(base + "_vecnormalize.pkl.tmp")
            _fsync_replace(base + "_vecnormalize.pkl.tmp", base + "_vecnormalize.pkl")
        with open(base + ".zip.tmp", "wb") as handle:
            self.model.save(handle)
        _fsync_replace(base + ".zip.tmp", base + ".zip")
        if self.verbose >= 1:
            print(f"Saving model checkpoint to {base}.zip")
        if self.keep is not None:
            for old in list_checkpoints(self.save_path, self.name_prefix)[self.keep :]:
                for path in (old.model, old.vecnormalize):
                    if path is not None and os.path.exists(path):
                        os.remove(path)
        return base + ".zip"


__all__ = ["AtomicCheckpointCallback", "Checkpoint", "list_checkpoints"]
