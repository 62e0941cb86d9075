"""
What a run folder records about itself: ``run.json`` (spec, status, attempts, versions, wall time),
``heartbeat.json`` (steps done, for the grid's progress display) and the SB3 CSV logs, one file per
attempt (``logs/progress_<k>.csv``), merged into ``progress.csv`` without the steps an interrupted
attempt did after its last checkpoint.

Every write goes to a temporary file first and then replaces the old one, so a run killed at any
moment leaves either the old or the new ``run.json``, never half of one.
"""

import csv
import json
import os
import platform
import socket
import time
from collections.abc import Iterator
from contextlib import suppress
from datetime import datetime, timezone
from typing import Any, Optional

import numpy as np

from sb3_pref.experiments.registry import defining_module
from sb3_pref.experiments.spec import RunSpec

RUN_FILE, HEARTBEAT_FILE, PROGRESS_FILE = "run.json", "heartbeat.json", "progress.csv"
PENDING, RUNNING, FINISHED, FAILED, INTERRUPTED = "pending", "running", "finished", "failed", "interrupted"
STEP_KEY = "time/total_timesteps"


def write_json(path: str, data: Any) -> None:
    """Write JSON atomically (temporary file, then ``os.replace``)."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def read_json(path: str) -> Optional[dict[str, Any]]:
    """The file's content, or None if it does not exist."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """Versions of what decides a run's results, and where it ran."""
    from importlib import metadata

    found = {"python": platform.python_version(), "host": socket.gethostname(), "platform": platform.platform()}
    for package in (
        "sb3_pref",
        "stable_baselines3",
        "sb3_contrib",
        "torch",
        "gymnasium",
        "numpy",
        "dm_control",
        "metaworld",
        "mujoco",
    ):
        with suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package.replace("_", "-") if package != "sb3_pref" else package)
    return found


class RunRecord:
    """
    ``run.json`` of one run folder.

    :param run_dir: the run's folder
    """

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, RUN_FILE)
        self.data: dict[str, Any] = read_json(self.path) or {}

    @classmethod
    def create(cls, run_dir: str, spec: RunSpec, grid: str) -> "RunRecord":
        """Start the record of a planned run (status ``pending``)."""
        os.makedirs(run_dir, exist_ok=True)
        record = cls(run_dir)
        record.data = {
            "run_id": spec.run_id,
            "grid": grid,
            "spec": spec.to_dict(),
            "fingerprint": spec.fingerprint(),
            "seed": spec.seed,
            "status": PENDING,
            "attempts": [],
            "wall_time": 0.0,
            "created": now(),
        }
        module = defining_module(spec.algo)
        if module is not None:  # a kind from outside the package: the worker imports its module (registry)
            record.data["kind_module"] = module
        record.save()
        return record

    @property
    def exists(self) -> bool:
        return bool(self.data)

    @property
    def spec(self) -> RunSpec:
        return RunSpec.from_dict(self.data["spec"])

    @property
    def status(self) -> str:
        return self.data.get("status", PENDING)

    def save(self) -> None:
        write_json(self.path, self.data)

    def start_attempt(self, backend: str, start_step: int) -> int:
        """Record a new attempt (status ``running``); :return: its index"""
        self.data["status"] = RUNNING
        self.data["versions"] = versions()
        self.data.setdefault("attempts", []).append(
            {
                "backend": backend,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": now(),
                "started_at": time.time(),
                "start_step": int(start_step),
                "status": RUNNING,
            }
        )
        self.save()
        return len(self.data["attempts"]) - 1

    def end_attempt(
        self,
        status: str,
        wall_time: float,
        end_step: Optional[int] = None,
        error: Optional[str] = None,
        cpu_time: Optional[float] = None,
    ) -> None:
        """Close the current attempt and set the run's status (times in seconds)."""
        attempt = self.data["attempts"][-1]
        attempt.update(status=status, ended=now(), wall_time=round(wall_time, 2))
        if cpu_time is not None:
            attempt["cpu_time"] = round(cpu_time, 2)
        if end_step is not None:
            attempt["end_step"] = int(end_step)
        if error:
            attempt["error"] = error
        self.data["status"] = status
        self.data["wall_time"] = round(sum(a.get("wall_time", 0.0) for a in self.data["attempts"]), 2)
        self.data["cpu_time"] = round(sum(a.get("cpu_time", 0.0) for a in self.data["attempts"]), 2)
        self.save()

    def mark_ended(self, status: str, message: str) -> None:
        """
        Record the end of a run whose process died without recording it (killed, or crashed before
        it could write): closes its open attempt, if any, with the time since it started.
        """
        attempts = self.data.get("attempts", [])
        if attempts and attempts[-1].get("status") == RUNNING:
            wall_time = time.time() - float(attempts[-1].get("started_at", time.time()))
            self.end_attempt(status, wall_time, error=message)
        else:
            self.data.update(status=status, error=message)
            self.save()

    def attempt_starts(self) -> list[int]:
        return [int(a.get("start_step", 0)) for a in self.data.get("attempts", [])]


class RunLock:
    """
    An exclusive lock on a run folder, held while a process trains the run, so that the same run is
    never trained twice at once (a grid restarted while orphaned runs still finish, two grids on one
    folder). The operating system releases it when the process ends, however it ends.

    :param run_dir: the run's folder
    """

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, ".run.lock")
        self._handle: Optional[Any] = None

    def acquire(self) -> bool:
        """:return: whether the lock was free (and is now held)"""
        self._handle = open(self.path, "a+")
        try:
            import fcntl

            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no fcntl (Windows): no protection
            return True
        except OSError:
            self.release()
            return False
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def is_running(run_dir: str) -> bool:
    """Whether a live process holds the run's lock."""
    lock = RunLock(run_dir)
    free = lock.acquire()
    lock.release()
    return not free


def write_heartbeat(run_dir: str, num_timesteps: int, total_timesteps: int) -> None:
    write_json(
        os.path.join(run_dir, HEARTBEAT_FILE),
        {"num_timesteps": int(num_timesteps), "total": int(total_timesteps), "time": time.time()},
    )


def read_heartbeat(run_dir: str) -> int:
    """Steps the run had done at its last heartbeat (0 without one)."""
    with suppress(ValueError, OSError):
        data = read_json(os.path.join(run_dir, HEARTBEAT_FILE))
        if data:
            return int(data["num_timesteps"])
    return 0


# ------------------------------------------------------------------------------ CSV logs
def attempt_log_path(run_dir: str, attempt: int) -> str:
    return os.path.join(run_dir, "logs", f"progress_{attempt}.csv")


def read_csv_columns(path: str) -> dict[str, np.ndarray]:
    """
    An SB3 ``progress.csv`` as columns of floats (NaN where a row has no value or a non-number).

    :param path: the CSV file
    :return: ``{key: array}``, all arrays of the same length
    """
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns: dict[str, np.ndarray] = {}
    for index, key in enumerate(header):
        values = np.full(len(body), np.nan)
        for row_index, row in enumerate(body):
            if index < len(row) and row[index] != "":
                with suppress(ValueError):
                    values[row_index] = float(row[index])
        columns[key] = values
    return columns


def _attempt_logs(run_dir: str, starts: list[int]) -> Iterator[tuple[dict[str, np.ndarray], float]]:
    """Each attempt's columns with the step after which the next attempt took over (inf for the last)."""
    for index in range(len(starts)):
        path = attempt_log_path(run_dir, index)
        if not os.path.exists(path):
            continue
        cutoff = float(starts[index + 1]) if index + 1 < len(starts) else np.inf
        yield read_csv_columns(path), cutoff


def merged_progress(run_dir: str, use_merged_file: bool = True) -> dict[str, np.ndarray]:
    """
    The run's log as one table: ``progress.csv`` when the run wrote it, else the attempts' logs
    joined, each cut at the checkpoint the next attempt restarted from.

    :param run_dir: the run's folder
    :param use_merged_file: read ``progress.csv`` when it exists (False: always join the attempts' logs)
    :return: ``{key: array}``, rows in step order (empty without any log)
    """
    merged_file = os.path.join(run_dir, PROGRESS_FILE)
    if use_merged_file and os.path.exists(merged_file):
        return read_csv_columns(merged_file)
    parts = []
    for columns, cutoff in _attempt_logs(run_dir, RunRecord(run_dir).attempt_starts()):
        if STEP_KEY in columns:
            keep = columns[STEP_KEY] <= cutoff
            parts.append({key: values[keep] for key, values in columns.items()})
    if not parts:
        return {}
    keys = list(dict.fromkeys(key for part in parts for key in part))
    return {key: np.concatenate([part.get(key, np.full(len(part[STEP_KEY]), np.nan)) for part in parts]) for key in keys}


def write_progress(run_dir: str) -> None:
    """Write the merged log to ``progress.csv`` (sorted columns, empty cells for missing values)."""
    columns = merged_progress(run_dir, use_merged_file=False)
    if not columns:
        return
    keys = sorted(columns)
    temporary = os.path.join(run_dir, PROGRESS_FILE + ".tmp")
    with open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(keys)
        for row in range(len(columns[keys[0]])):
            writer.writerow([_cell(columns[key][row]) for key in keys])
    os.replace(temporary, os.path.join(run_dir, PROGRESS_FILE))


def _cell(value: float) -> str:
    if np.isnan(value):
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))
