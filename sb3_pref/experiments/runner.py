"""
Run a grid: plan its runs against what the output folder already holds, then keep the backend's
slots busy until every run has finished or failed, with a progress line (runs done / running /
failed, elapsed time, ETA).

Planning is where results are protected: a ``finished`` run is skipped; an unfinished one (pending,
failed, interrupted, or "running" in a process that no longer exists) is started again and resumes
from its last checkpoint; a folder whose run was made with different settings is a conflict and is
left untouched. One grid at a time may use an output folder (a lock file says which).
"""

import fnmatch
import io
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional, TextIO, Union, cast

from sb3_pref.experiments.axes import ConfigError
from sb3_pref.experiments.backends import Backend, make_backend
from sb3_pref.experiments.config import GridConfig, RunSpec, load_config
from sb3_pref.experiments.records import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    RUNNING,
    RunRecord,
    is_running,
    now,
    read_heartbeat,
    read_json,
    write_json,
)
from sb3_pref.experiments.registry import check_importable

GRID_FILE, LOCK_FILE = "grid.json", ".grid.lock"


@dataclass
class PlannedRun:
    spec: RunSpec
    run_dir: str
    state: str  # "finished", "todo", "conflict" or "running elsewhere"
    done_steps: int = 0


@dataclass
class GridResult:
    """What :func:`run_grid` did. Lists hold run ids."""

    output_dir: str
    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)
    running_elsewhere: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.conflicts or self.interrupted or self.running_elsewhere)


def plan_grid(config: GridConfig, only: Optional[str] = None, close_stale: bool = False) -> list[PlannedRun]:
    """
    Match the grid's runs with the output folder, creating the records of new runs.

    :param config: the grid
    :param only: a glob on run ids (``"prefppo/walker_walk/*"``) to run a part of the grid
    :param close_stale: record runs still marked ``running`` as interrupted (only safe while holding
        the folder's lock, as :func:`run_grid` does: then no process can be running them)
    :return: every selected run and whether it is finished, to do, or in conflict
    """
    planned = []
    for spec in config.runs():
        if only and not fnmatch.fnmatch(spec.run_id, only):
            continue
        run_dir = os.path.join(config.output_dir, spec.run_id)
        record = RunRecord(run_dir)
        if not record.exists:
            record = RunRecord.create(run_dir, spec, config.name)
        if record.data.get("fingerprint") != spec.fingerprint():
            planned.append(PlannedRun(spec, run_dir, "conflict"))
            continue
        if is_running(run_dir):
            planned.append(PlannedRun(spec, run_dir, "running elsewhere"))
            continue
        if close_stale and record.status == RUNNING:
            # Nothing else holds the folder's lock, so no process is running it: it died without saying so.
            record.mark_ended(INTERRUPTED, "its process ended without recording it (killed, or the machine stopped)")
        state = "finished" if record.status == FINISHED else "todo"
        planned.append(PlannedRun(spec, run_dir, state, read_heartbeat(run_dir)))
    return planned


class _Lock:
    """An exclusive lock on a grid folder, released when the process ends however it ends."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, LOCK_FILE)
        self.handle: Optional[TextIO] = None

    def __enter__(self) -> "_Lock":
        self.handle = open(self.path, "a+")
        try:
            import fcntl

            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no fcntl (Windows): no protection against a second runner
            pass
        except OSError:
            self.handle.close()
            raise RuntimeError(f"another grid is running in {os.path.dirname(self.path)} (lock {self.path})") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        cast(TextIO, self.handle).close()  # opened by __enter__


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressDisplay:
    """
    One status line: runs done / running / failed / to go, elapsed time and an ETA from the env
    steps done since the grid started (read from the runs' heartbeats). On a terminal the line is
    redrawn in place; otherwise it is printed every ``interval`` seconds. Runs that end are printed
    on lines of their own.
    """

    def __init__(self, planned: list[PlannedRun], workers: int, stream: TextIO = sys.stdout, interval: float = 60.0) -> None:
        self.stream, self.interval, self.workers = stream, interval, workers
        self.total = {run.run_dir: run.spec.total_timesteps for run in planned if run.state == "todo"}
        self.start_steps = {run.run_dir: run.done_steps for run in planned if run.state == "todo"}
        self.done = sum(run.state == "finished" for run in planned)
        self._done_before = self.done
        self.n_runs = sum(run.state in ("finished", "todo") for run in planned)
        self.failed = 0
        self._failed_dirs: set[str] = set()
        self.running: dict[str, float] = {}
        self.steps = dict(self.start_steps)
        self.started = time.monotonic()
        self._last_print = 0.0
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def eta(self) -> Optional[float]:
        """Seconds left at the rate of env steps done so far; None until there is a rate worth quoting."""
        done = sum(self.steps[d] - self.start_steps[d] for d in self.steps)
        remaining = sum(max(0, self.total[d] - self.steps[d]) for d in self.total if d not in self._failed_dirs)
        elapsed = time.monotonic() - self.started
        # Early rates mostly measure start-up (imports, env creation): wait for 2% of the steps or a finished run.
        if done <= 0 or elapsed <= 0 or (done < 0.02 * sum(self.total.values()) and self.done == self._done_before):
            return None
        return remaining / (done / elapsed)

    def line(self) -> str:
        eta = self.eta()
        to_go = self.n_runs - self.done - self.failed - len(self.running)
        return (
            f"runs: {self.done}/{self.n_runs} done, {len(self.running)} running, {self.failed} failed, {to_go} to go"
            f" | elapsed {_duration(time.monotonic() - self.started)} | ETA {_duration(eta) if eta is not None else '--'}"
        )

    def started_run(self, run_dir: str) -> None:
        self.running[run_dir] = time.monotonic()

    def ended_run(self, run_dir: str, run_id: str, ok: bool, message: str = "") -> None:
        took = time.monotonic() - self.running.pop(run_dir, time.monotonic())
        if ok:
            self.done += 1
            self.steps[run_dir] = self.total[run_dir]
        else:
            self.failed += 1
            self._failed_dirs.add(run_dir)
        # The status line follows once the freed slot is refilled (the scheduler forces it), so it counts the new run.
        outcome = f"{'finished' if ok else 'FAILED'} {run_id} after {_duration(took)}" + (f": {message}" if message else "")
        self._write(outcome + "\n")

    def event(self, text: str, final: bool = False) -> None:
        if final:
            self._write(self.line() + "\n")
        self._write(f"{text}\n")
        if not final:
            self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        for run_dir in self.running:
            self.steps[run_dir] = max(self.steps[run_dir], read_heartbeat(run_dir))
        if self.tty:
            self._write(f"\r\033[K{self.line()}")
        elif force or time.monotonic() - self._last_print >= self.interval:
            self._write(self.line() + "\n")
            self._last_print = time.monotonic()

    def _write(self, text: str) -> None:
        if self.tty and not text.startswith("\r"):
            text = "\r\033[K" + text
        self.stream.write(text)
        self.stream.flush()


def _record_invocation(config: GridConfig, backend: Backend, planned: list[PlannedRun]) -> None:
    path = os.path.join(config.output_dir, GRID_FILE)
    grid = read_json(path) or {"name": config.name, "invocations": []}
    grid.update(name=config.name, description=config.description, runs=[run.spec.run_id for run in planned])
    grid["invocations"].append({"time": now(), "backend": backend.name, "capacity": backend.capacity})
    write_json(path, grid)


def _close_dead_run(run_dir: str, message: str, status: str = FAILED) -> None:
    """A run whose process ended without recording its end (killed, or failed before starting)."""
    record = RunRecord(run_dir)
    if record.status in (RUNNING, "pending") and not is_running(run_dir):
        record.mark_ended(status, message)


def run_grid(
    config: Union[GridConfig, str, os.PathLike, dict],
    backend: Union[str, Backend] = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    output_dir: Optional[str] = None,
    only: Optional[str] = None,
    stream: Optional[TextIO] = sys.stdout,
    interval: float = 60.0,
) -> GridResult:
    """
    Run every unfinished run of a grid; finished runs are skipped, unfinished ones resume from
    their last checkpoint. Ctrl-C stops the runs in flight (they resume at the next call).

    :param config: a :class:`GridConfig`, a config file or a config dict
    :param backend: ``"local"``, ``"ray"`` or a :class:`~sb3_pref.experiments.backends.Backend`
    :param workers: runs at a time (default: the usable cores, or the Ray cluster's CPUs)
    :param address: an existing Ray cluster (``ray`` only)
    :param output_dir: overrides the config's ``output_dir``
    :param only: a glob on run ids, to run part of the grid
    :param stream: where the progress goes (None: nowhere)
    :param interval: seconds between progress lines when ``stream`` is not a terminal
    :return: what happened to each run
    """
    if not isinstance(config, GridConfig):
        config = load_config(config, output_dir=output_dir)
    elif output_dir is not None:
        config.output_dir = output_dir
    os.makedirs(config.output_dir, exist_ok=True)
    result = GridResult(config.output_dir)
    with _Lock(config.output_dir):
        planned = plan_grid(config, only, close_stale=True)
        todo = [run for run in planned if run.state == "todo"]
        result.skipped = [run.spec.run_id for run in planned if run.state == "finished"]
        result.conflicts = [run.spec.run_id for run in planned if run.state == "conflict"]
        result.running_elsewhere = [run.spec.run_id for run in planned if run.state == "running elsewhere"]
        if not todo:
            _report_plan(stream, result)
            return result
        if not isinstance(backend, Backend):  # the built-in backends train in fresh processes
            for algo in sorted({run.spec.algo for run in todo}):
                try:
                    check_importable(algo)
                except ValueError as error:
                    raise ConfigError(str(error)) from None
        runner = backend if isinstance(backend, Backend) else make_backend(backend, workers, address)
        try:
            _record_invocation(config, runner, planned)
            display = ProgressDisplay(planned, runner.capacity, stream or io.StringIO(), interval)
            _report_plan(stream, result, display)
            _schedule(runner, todo, display, result)
        finally:
            runner.close()
    return result


def _report_plan(stream: Optional[TextIO], result: GridResult, display: Optional[ProgressDisplay] = None) -> None:
    if stream is None:
        return
    lines = [f"grid {result.output_dir}: {len(result.skipped)} runs already finished (skipped)"]
    lines += [f"CONFLICT {run_id}: its folder holds a run with other settings; left untouched" for run_id in result.conflicts]
    lines += [f"BUSY {run_id}: another process is training it; left alone" for run_id in result.running_elsewhere]
    stream.write("\n".join(lines) + "\n")
    if display is not None:
        display.refresh(force=True)


def _schedule(backend: Backend, todo: list[PlannedRun], display: ProgressDisplay, result: GridResult) -> None:
    queue = list(todo)
    ids = {run.run_dir: run.spec.run_id for run in todo}
    in_flight, ended = 0, False
    try:
        while queue or in_flight:
            while queue and in_flight < backend.capacity:
                run = queue.pop(0)
                backend.start(run.run_dir)
                display.started_run(run.run_dir)
                in_flight += 1
            if ended:
                display.refresh(force=True)
            ended = False
            for run_dir, ok, message in backend.poll(timeout=1.0):
                ended = True
                in_flight -= 1
                if not ok:
                    _close_dead_run(run_dir, message)
                    result.failed[ids[run_dir]] = message
                else:
                    result.finished.append(ids[run_dir])
                display.ended_run(run_dir, ids[run_dir], ok, message)
            display.refresh()
    except KeyboardInterrupt:
        for run_dir in backend.stop_all():
            _close_dead_run(run_dir, "stopped by Ctrl-C", INTERRUPTED)
            result.interrupted.append(ids[run_dir])
            display.running.pop(run_dir, None)
        display.event(f"interrupted: {len(result.interrupted)} runs stopped; run the grid again to resume them", final=True)
    else:
        display.event("grid done" if result.ok else f"grid done with {len(result.failed)} failed runs", final=True)
