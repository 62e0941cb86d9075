import os
import subprocess
import sys
from importlib import metadata

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
