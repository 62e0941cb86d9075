import os
import subprocess
import sys
import tempfile
from importlib import metadata

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The processes tests start (examples, the RL Zoo, grid workers, kill -9 scripts) inherit one thread each, as the
# tests themselves run: torch's default of one thread per core made each child fight the other worker for the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# SB3 makes a new tempdir/SB3-<date> folder for the logger of every learn() call that names none (thousands over a
# suite, all empty: the stdout logger writes no file). One fixed folder instead, for this process and its children.
os.environ.setdefault("SB3_LOGDIR", os.path.join(tempfile.gettempdir(), "sb3_pref-tests-sb3-logs"))


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Small networks run faster single-threaded, and tests do not fight each other for cores.
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def setup_metadata(tmp_path_factory) -> metadata.Distribution:
    """The metadata that setup.py gives a build (extras, license), written by setuptools into a temporary folder."""
    # pyproject.toml builds with setuptools>=77, the first to write the SPDX License-Expression.
    pytest.importorskip("setuptools", minversion="77")
    egg_base = tmp_path_factory.mktemp("egg_info")
    subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(egg_base)], cwd=REPO, check=True, capture_output=True
    )
    return metadata.Distribution.at(egg_base / "sb3_pref.egg-info")


#: tests of half a minute or more on one core (``--durations``), longest first. They are collected first, so that
#: pytest-xdist, which deals the first tests round-robin, starts them on every worker at once instead of leaving one
#: worker running the last of them alone while the other waits.
SLOW_FIRST = (
    "tests/test_learning_guard.py",
    "tests/test_ad.py::test_ad_improves_in_context",
    "tests/test_experiments.py::test_local_and_ray_backends",
    "tests/test_experiments.py::test_grid_skips_finished_runs",
    "tests/test_experiments_pebble.py::test_pebble_grid_spends_its_budget",
    "tests/test_experiments.py::test_progress_lines",
    "tests/test_docs.py::test_docs_code_samples_run[howto-grid.md]",
    "tests/test_ad_resume.py::test_train_ad_example_resumes",
    "tests/test_examples.py::test_python_example_answers_help",
    "tests/test_ad.py::test_ad_in_the_grid_runner",
    "tests/test_rl2.py::test_short_run_beats_random",
)


def pytest_collection_modifyitems(session, config, items):
    def rank(item) -> int:
        return next((index for index, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order
