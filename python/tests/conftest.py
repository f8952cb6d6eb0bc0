import pytest
import torch

import hipdiffusion


@pytest.fixture(autouse=True)
def fresh_state():
    """Each test starts with an empty fallback report, the kernels enabled and a fixed seed."""
    hipdiffusion.set_enabled(True)
    hipdiffusion.reset_fallback_report()
    torch.manual_seed(0)
    yield
    hipdiffusion.set_enabled(True)
