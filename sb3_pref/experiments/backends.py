"""
Where the runs of a grid execute. Both backends run :func:`~sb3_pref.experiments.training.execute_run`
on a run folder with one torch thread, so a run gives the same results on either.

- :class:`LocalBackend` (default): one child process per run (``python -m sb3_pref.experiments worker
  RUN_DIR``), as many at a time as there are usable cores; each run's output goes to its ``stdout.log``.
- :class:`RayBackend`: one Ray task per run (``num_cpus=1``), on a Ray instance started here or on an
  existing cluster (``address``). Run folders must then be on a file system every node sees.
"""

import os
import signal
import subprocess
import sys
from typing import IO, Any, Optional

#: a finished run: its folder, whether it succeeded, and an error message if not
Outcome = tuple[str, bool, str]

# Applied to every run, whichever backend starts it: BLAS libraries otherwise start one thread per core.
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def usable_cores() -> int:
    """The cores this process may run on (the affinity mask where there is one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _package_path() -> str:
    """
    ``PYTHONPATH`` for a child run: this process's copy of ``sb3_pref`` first, so the child runs the same
    code even when the package is imported from a source checkout rather than installed.
    """
    import sb3_pref

    root = os.path.dirname(os.path.dirname(os.path.abspath(sb3_pref.__file__)))
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([root, inherited] if inherited else [root])


class Backend:
    """Starts runs and reports when they end. ``capacity`` runs may be in flight at once."""

    name = "base"
    capacity = 1

    def start(self, run_dir: str) -> None:
        raise NotImplementedError

    def poll(self, timeout: float) -> list[Outcome]:
        """Wait up to ``timeout`` seconds for runs to end; :return: the runs that ended"""
        raise NotImplementedError

    def stop_all(self) -> list[str]:
        """Stop every run in flight; :return: their folders"""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the backend holds."""


class LocalBackend(Backend):
    """
    Child processes on this machine.

    :param workers: runs at a time (default: the usable cores)
    """

    name = "local"

    def __init__(self, workers: Optional[int] = None) -> None:
        self.capacity = workers or usable_cores()
        self._processes: dict[str, tuple[subprocess.Popen, IO[bytes]]] = {}

    def start(self, run_dir: str) -> None:
        log = open(os.path.join(run_dir, "stdout.log"), "ab")
        environment = {**os.environ, **_ONE_THREAD, "PYTHONUNBUFFERED": "1", "PYTHONPATH": _package_path()}
        # Own session: a Ctrl-C in the terminal reaches the runner only, which then stops each
        # run itself (SIGTERM, recorded as "interrupted" by the run).
        process = subprocess.Popen(
            [sys.executable, "-m", "sb3_pref.experiments", "worker", run_dir],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
            preexec_fn=_end_with_parent if sys.platform.startswith("linux") else None,
        )
        self._processes[run_dir] = (process, log)

    def poll(self, timeout: float) -> list[Outcome]:
        import time

        deadline = time.monotonic() + timeout
        while True:
            ended = []
            for run_dir, (process, log) in list(self._processes.items()):
                code = process.poll()
                if code is not None:
                    log.close()
                    del self._processes[run_dir]
                    ended.append((run_dir, code == 0, "" if code == 0 else _exit_message(code, run_dir)))
            if ended or time.monotonic() >= deadline:
                return ended
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def stop_all(self) -> list[str]:
        stopped = list(self._processes)
        for process, _ in self._processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, log in self._processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
        self._processes.clear()
        return stopped


def _end_with_parent() -> None:
    """In the child, before it runs: ask Linux to SIGTERM it when the runner dies (even by SIGKILL)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))


def _exit_message(code: int, run_dir: str) -> str:
    cause = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return f"{cause}; see {os.path.join(run_dir, 'stdout.log')}"


def _ray_execute(run_dir: str) -> str:
    """The Ray task: one run, one thread."""
    os.environ.update(_ONE_THREAD)
    from sb3_pref.experiments.training import execute_run

    return execute_run(run_dir, backend="ray", stdout_log=False)["status"]


class RayBackend(Backend):
    """
    Ray tasks of one CPU each.

    :param address: an existing cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``);
        None starts a Ray instance on this machine, stopped again by :meth:`close`
    :param workers: runs at a time (default: the cluster's CPUs; with a local instance, the usable cores)
    """

    name = "ray"

    def __init__(self, address: Optional[str] = None, workers: Optional[int] = None) -> None:
        try:
            import ray
        except ImportError as error:
            from sb3_pref.envs.optional import install_hint

            raise ImportError(f"the ray backend needs Ray: {install_hint('experiments')}") from error
        self._ray = ray
        self._started_here = not ray.is_initialized()
        if self._started_here:
            local: dict[str, Any] = {}
            if address is None:
                local = dict(num_cpus=workers or usable_cores(), include_dashboard=False)
            env_vars = dict(_ONE_THREAD)
            if address is None:
                # Workers on this machine import this process's sb3_pref; a cluster's nodes bring their own.
                env_vars["PYTHONPATH"] = _package_path()
            ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": env_vars}, **local)
        self.capacity = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_ray_execute)
        self._refs: dict[object, str] = {}

    def start(self, run_dir: str) -> None:
        self._refs[self._remote.remote(os.path.abspath(run_dir))] = run_dir

    def poll(self, timeout: float) -> list[Outcome]:
        if not self._refs:
            return []
        ready, _ = self._ray.wait(list(self._refs), num_returns=len(self._refs), timeout=timeout)
        ended = []
        for ref in ready:
            run_dir = self._refs.pop(ref)
            try:
                self._ray.get(ref)
                ended.append((run_dir, True, ""))
            except Exception as error:
                ended.append((run_dir, False, str(error).strip().splitlines()[-1] if str(error).strip() else repr(error)))
        return ended

    def stop_all(self) -> list[str]:
        stopped = list(self._refs.values())
        for ref in self._refs:
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        return stopped

    def close(self) -> None:
        if self._started_here:
            self._ray.shutdown()


def make_backend(name: str, workers: Optional[int] = None, address: Optional[str] = None) -> Backend:
    """
    :param name: ``"local"`` or ``"ray"``
    :param workers: runs at a time
    :param address: Ray cluster address (``ray`` only)
    :return: the backend
    """
    if name == "local":
        if address is not None:
            raise ValueError("address is for the ray backend: use --backend ray --address ...")
        return LocalBackend(workers)
    if name == "ray":
        return RayBackend(address, workers)
    raise ValueError(f"unknown backend {name!r}: expected 'local' or 'ray'")
