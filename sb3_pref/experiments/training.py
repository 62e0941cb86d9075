"""
One run of a grid, from its folder: start it, or resume it from its last checkpoint, train to its
step count, save its outputs, and record all of it in ``run.json``.

The order of the final writes is what makes a grid safe to interrupt anywhere: outputs, then the
merged ``progress.csv``, then ``status: finished`` in ``run.json``, and only then the checkpoints
are deleted. A run that is not ``finished`` is resumed from its newest readable checkpoint; a
``finished`` run is never touched again.
"""

import os
import shutil
import sys
import time
import traceback
from typing import Any, Callable, Optional, cast

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import CSVOutputFormat, HumanOutputFormat, KVWriter, Logger, TensorBoardOutputFormat
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.common.callbacks import AtomicCheckpointCallback, Checkpoint
from sb3_pref.common.callbacks import list_checkpoints as _list_checkpoints
from sb3_pref.experiments.records import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    STEP_KEY,
    RunLock,
    RunRecord,
    attempt_log_path,
    merged_progress,
    write_heartbeat,
    write_progress,
)
from sb3_pref.experiments.registry import import_kind, run_kind
from sb3_pref.experiments.spec import EVAL_EPISODES, RunSpec

CHECKPOINT_DIR = "checkpoints"


def has_tensorboard() -> bool:
    """Whether SB3 can write tensorboard logs here."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def replay_buffer_path(checkpoint_model: str) -> str:
    """Where a checkpoint's replay buffer is: ``ckpt_<step>.zip`` -> ``ckpt_<step>_replay_buffer.pkl``."""
    return checkpoint_model[: -len(".zip")] + "_replay_buffer.pkl"


def save_replay_buffer_beside(model: BaseAlgorithm, checkpoint_base: str) -> None:
    """Write an off-policy model's replay buffer for the checkpoint ``<checkpoint_base>.zip``, atomically."""
    if not isinstance(model, OffPolicyAlgorithm):
        return
    path = checkpoint_base + "_replay_buffer.pkl"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "wb") as handle:
        model.save_replay_buffer(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)


def list_checkpoints(run_dir: str) -> list[Checkpoint]:
    """The run's complete checkpoints, newest first."""
    return _list_checkpoints(os.path.join(run_dir, CHECKPOINT_DIR))


class RunCallback(AtomicCheckpointCallback):
    """
    The library's :class:`~sb3_pref.common.callbacks.AtomicCheckpointCallback` (checkpoints at rollout
    start, written atomically, the newest ``keep`` kept) plus the heartbeat the grid's progress display reads.
    """

    def __init__(self, run_dir: str, every: int, total_timesteps: int, keep: int = 2, heartbeat_seconds: float = 5.0) -> None:
        super().__init__(every, os.path.join(run_dir, CHECKPOINT_DIR), keep=keep)
        self.run_dir, self.every, self.total = run_dir, every, total_timesteps
        self.heartbeat_seconds = heartbeat_seconds
        self._last_beat = 0.0
        self._episode_end_step = -1

    def _on_step(self) -> bool:
        if time.monotonic() - self._last_beat > self.heartbeat_seconds:
            self._beat()
        if np.any(self.locals.get("dones", False)):
            self._episode_end_step = self.num_timesteps
        return True

    def _on_training_end(self) -> None:
        super()._on_training_end()
        # An off-policy learner writes its log row at episode ends (log_interval=1 here), so the steps after
        # the last one (and the reward rounds in them) would be missing from progress.csv: write that row.
        if isinstance(self.model, OffPolicyAlgorithm) and self.num_timesteps != self._episode_end_step:
            self.model.dump_logs()

    def _on_rollout_start(self) -> None:
        super()._on_rollout_start()
        # Not at every rollout: an off-policy "rollout" is one env step, and a beat is a file write with fsync.
        if time.monotonic() - self._last_beat > self.heartbeat_seconds:
            self._beat()

    def save_checkpoint(self) -> str:
        """The library's checkpoint; an off-policy model's replay buffer is written first, beside it."""
        save_replay_buffer_beside(self.model, os.path.join(self.save_path, f"{self.name_prefix}_{self.num_timesteps}"))
        path = super().save_checkpoint()
        kept = {replay_buffer_path(checkpoint.model) for checkpoint in list_checkpoints(self.run_dir)}
        for name in os.listdir(self.save_path):
            full = os.path.join(self.save_path, name)
            if name.endswith("_replay_buffer.pkl") and full not in kept:
                os.remove(full)  # its checkpoint was pruned
        return path

    def _beat(self) -> None:
        write_heartbeat(self.run_dir, self.num_timesteps, self.total)
        self._last_beat = time.monotonic()


def make_logger(run_dir: str, attempt: int, stdout: bool = True) -> Logger:
    """This attempt's CSV log, the run's tensorboard folder (shared by attempts) and optionally stdout."""
    path = attempt_log_path(run_dir, attempt)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    formats: list[KVWriter] = [CSVOutputFormat(path)]
    if has_tensorboard():
        formats.append(TensorBoardOutputFormat(os.path.join(run_dir, "tb")))
    if stdout:
        formats.append(HumanOutputFormat(sys.stdout))
    return Logger(folder=run_dir, output_formats=formats)


def evaluate_final_policy(
    model: BaseAlgorithm, make_env: Callable[[], VecEnv], episodes: int = EVAL_EPISODES
) -> dict[str, Any]:
    """
    What a user of the trained model gets: SB3's ``evaluate_policy`` (deterministic actions) on a fresh
    env seeded ``seed + EVAL_SEED_OFFSET``, through the run's frozen ``VecNormalize`` statistics when it has
    them. Training returns, the grid's score, come from the exploring policy and can sit far below this.

    :param model: the trained model
    :param make_env: builds that fresh env (the run kind's ``eval_env``)
    :param episodes: episodes to average
    :return: ``eval_return``, ``eval_return_std``, ``eval_episodes`` and ``eval_cpu_time`` (CPU seconds
        of the evaluation, which the run's ``cpu_time`` includes)
    """
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize, sync_envs_normalization

    started = time.process_time()
    env = make_env()
    if model.get_vec_normalize_env() is not None:
        env = VecNormalize(env, training=False, norm_reward=False)
        sync_envs_normalization(cast(VecEnv, model.get_env()), env)
    # without return_episode_rewards, evaluate_policy returns two floats (its annotation also allows lists)
    mean, std = cast(tuple[float, float], evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True))
    env.close()
    return {
        "eval_return": float(mean),
        "eval_return_std": float(std),
        "eval_episodes": episodes,
        "eval_cpu_time": round(time.process_time() - started, 2),
    }


def final_scores(run_dir: str) -> dict[str, float]:
    """The run's final true return, success rate and reward-model quality, as the report computes them."""
    from sb3_pref.experiments.results import QUALITY_KEYS, RETURN_KEY, SUCCESS_KEY, final_score

    columns = merged_progress(run_dir)
    scores = {key: final_score(columns, key) for key in (RETURN_KEY, SUCCESS_KEY, *QUALITY_KEYS) if key in columns}
    if STEP_KEY in columns and columns[STEP_KEY].size:
        scores[STEP_KEY] = float(np.nanmax(columns[STEP_KEY]))
    return {key: value for key, value in scores.items() if np.isfinite(value)}


def _load_newest(spec: RunSpec, run_dir: str, monitor_dir: str) -> tuple[BaseAlgorithm, Optional[Checkpoint]]:
    """
    The model from the newest checkpoint that loads (older ones are fallbacks), or a new one when the
    run has no checkpoint. A run whose checkpoints all fail to load is not restarted from step 0 behind
    the user's back: it raises, and the files stay where they are for inspection.
    """
    build = run_kind(spec.algo).build
    checkpoints = list_checkpoints(run_dir)
    errors = []
    for checkpoint in checkpoints:
        try:
            return build(spec, monitor_dir, checkpoint), checkpoint
        except Exception as error:  # a truncated file from a crash: try the one before
            errors.append(f"{os.path.basename(checkpoint.model)}: {error!r}")
            print(f"checkpoint {checkpoint.model} does not load ({error!r}): trying an older one", file=sys.stderr)
    if checkpoints:
        raise RuntimeError(
            f"none of the {len(checkpoints)} checkpoints in {os.path.join(run_dir, CHECKPOINT_DIR)} loads "
            f"({'; '.join(errors)}). They were kept: move the folder away to restart this run from step 0, "
            "or fix the cause (e.g. a changed library version) and run the grid again."
        )
    return build(spec, monitor_dir, None), None


def execute_run(run_dir: str, backend: str = "local", stdout_log: bool = True) -> dict[str, Any]:
    """
    Train the run whose ``run.json`` is in ``run_dir`` to its step count (resuming from its newest
    checkpoint), save its outputs and mark it finished. A finished run is returned untouched.

    :param run_dir: the run's folder (created by the grid runner)
    :param backend: recorded in ``run.json``
    :param stdout_log: also print SB3's log tables
    :return: the run's ``run.json`` content
    """
    record = RunRecord(run_dir)
    if not record.exists:
        raise FileNotFoundError(f"{run_dir} has no run.json: create runs with sb3_pref.experiments.run_grid")
    lock = RunLock(run_dir)
    if not lock.acquire():
        raise RuntimeError(f"{run_dir} is being trained by another process")
    try:
        return _execute_locked(RunRecord(run_dir), backend, stdout_log)
    finally:
        lock.release()


def _execute_locked(record: RunRecord, backend: str, stdout_log: bool) -> dict[str, Any]:
    import torch

    run_dir = record.run_dir
    if record.status == FINISHED:
        return record.data
    # One thread per run: runs are the unit of parallelism, and small nets are faster single-threaded.
    torch.set_num_threads(1)
    spec = record.spec
    import_kind(spec.algo, record.data.get("kind_module"))  # a fresh worker knows only the built-in kinds
    started, cpu_started = time.monotonic(), time.process_time()
    attempt = len(record.data.get("attempts", []))
    monitor_dir = os.path.join(run_dir, "monitor", f"attempt{attempt}")
    os.makedirs(monitor_dir, exist_ok=True)
    model, checkpoint = _load_newest(spec, run_dir, monitor_dir)
    attempt = record.start_attempt(backend, start_step=checkpoint.step if checkpoint else 0)
    try:
        model.set_logger(make_logger(run_dir, attempt, stdout_log))
        callback = RunCallback(run_dir, spec.checkpoint_every, spec.total_timesteps)
        remaining = spec.total_timesteps - model.num_timesteps
        # Off-policy learners log every log_interval episodes (SB3's default 4): every episode makes a curve.
        learn_kwargs: dict[str, Any] = {"log_interval": 1} if isinstance(model, OffPolicyAlgorithm) else {}
        if remaining > 0:
            model.learn(remaining, callback=callback, reset_num_timesteps=checkpoint is None, **learn_kwargs)
        kind = run_kind(spec.algo)
        summary = kind.finish(model, spec, run_dir)
        if kind.eval_env is not None and spec.eval_episodes > 0:  # what a user of the trained model gets
            eval_env = kind.eval_env
            summary.update(evaluate_final_policy(model, lambda: eval_env(spec), episodes=spec.eval_episodes))
        cast(VecEnv, model.get_env()).close()  # every run's model is built with its env
        write_progress(run_dir)
        record.data["final"] = {**final_scores(run_dir), **summary}
        record.end_attempt(
            FINISHED, time.monotonic() - started, end_step=model.num_timesteps, cpu_time=time.process_time() - cpu_started
        )
    except BaseException as error:
        status = INTERRUPTED if isinstance(error, KeyboardInterrupt) else FAILED
        record.end_attempt(
            status,
            time.monotonic() - started,
            end_step=model.num_timesteps,
            error=traceback.format_exc(),
            cpu_time=time.process_time() - cpu_started,
        )
        raise
    write_heartbeat(run_dir, model.num_timesteps, spec.total_timesteps)
    if not spec.keep_checkpoints:
        shutil.rmtree(os.path.join(run_dir, CHECKPOINT_DIR), ignore_errors=True)
    return record.data
