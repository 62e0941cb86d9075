import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Small networks run faster single-threaded, and tests do not fight each other for cores.
    torch.set_num_threads(1)
    yield
