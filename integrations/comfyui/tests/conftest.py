"""The node package loaded as ComfyUI loads it (its folder's __init__.py as a package), without ComfyUI:
what CI can run. tools/integration/comfyui.sh runs it inside ComfyUI itself."""

import importlib.util
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
REPOSITORY = PACKAGE.parents[1]
sys.path.insert(0, str(REPOSITORY / "integrations" / "testing"))  # ldm_stand_ins


@pytest.fixture(scope="session")
def package():
    name = "comfyui_hipdiffusion_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PACKAGE / "__init__.py",
                                                      submodule_search_locations=[str(PACKAGE)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
