import os
import pathlib

import pytest
import torch

import hipdiffusion

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "models"


def _diffusers():
    """diffusers, with transformers for the pipelines' text encoders: tools/python/test.sh installs both
    (a missing one is a failure there), elsewhere the tests that need them skip."""
    if os.environ.get("HIPDIFFUSION_TESTS_NEED_DIFFUSERS"):
        import diffusers
        import transformers  # noqa: F401
        return diffusers
    pytest.importorskip("transformers")
    return pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def sd1():
    """The fixtures' tiny SD1.x-like pipeline (tools/make_fixtures.py), float32 on the CPU."""
    return _diffusers().StableDiffusionPipeline.from_pretrained(FIXTURES / "tiny_sd1", torch_dtype=torch.float32)


@pytest.fixture(scope="module")
def sdxl():
    """The fixtures' tiny SDXL-like pipeline, float32 on the CPU."""
    return _diffusers().StableDiffusionXLPipeline.from_pretrained(FIXTURES / "tiny_sdxl_pipeline",
                                                                  torch_dtype=torch.float32)


@pytest.fixture(autouse=True)
def fresh_state():
    """Each test starts with an empty fallback report, the kernels enabled and a fixed seed."""
    hipdiffusion.set_enabled(True)
    hipdiffusion.reset_fallback_report()
    torch.manual_seed(0)
    yield
    hipdiffusion.set_enabled(True)
