#!/usr/bin/env bash
# The Python package's tests on the CPU: a virtual environment (build/venv) with PyTorch from PyPI,
# the package built against it, then pytest. Run from the repository root after tools/install_deps.sh.
# The GPU tests in python/tests skip themselves on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=build/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# PyTorch 2.15 (what CI tests against; the package builds against any installed torch >= 2.4),
# scikit-build-core (the package's build backend), pytest, diffusers + transformers for the diffusers
# integration's tests on the fixtures' tiny pipelines (the versions they were checked with), and the
# clients the server's tests drive it with: webuiapi (A1111's client), schemathesis (its OpenAPI
# document checked against its answers), requests; and MLCommons' LoadGen, which drives the MLPerf-style
# harness (bench/mlperf_sdxl.py). --no-cache-dir: PyTorch and its CUDA libraries are several GB, and a
# cached copy of each wheel beside the installed one doubles that (CI's disk once ran out here).
"$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir torch==2.15.0 "scikit-build-core>=0.10" pytest numpy \
  diffusers==0.42.1 transformers==5.24.0 webuiapi==0.9.17 schemathesis==4.32.5 requests pillow \
  mlcommons-loadgen==6.0.17
# --no-build-isolation: build against the torch just installed, not a second copy in an isolated env.
"$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --no-build-isolation .
HIPDIFFUSION_TESTS_NEED_DIFFUSERS=1 "$venv/bin/python" -m pytest -q python/tests
# The ComfyUI node package's own tests (on stand-ins for ComfyUI's objects; tools/integration/comfyui.sh
# runs ComfyUI itself).
HIPDIFFUSION_TESTS_NEED_DIFFUSERS=1 "$venv/bin/python" -m pytest -q integrations/comfyui/tests
# The AUTOMATIC1111/Forge extension's own tests (on stand-ins for the web UIs' modules;
# tools/integration/a1111.sh runs AUTOMATIC1111 itself).
HIPDIFFUSION_TESTS_NEED_DIFFUSERS=1 "$venv/bin/python" -m pytest -q integrations/a1111/tests
# `hipdiffusion serve` with real clients (the CLI the README's command built, build/cpu/hipdiffusion):
# webuiapi, schemathesis, 32 concurrent clients, authentication and limits, SIGTERM, nginx in front of two.
"$venv/bin/python" -m pytest -q tests/server
# The MLPerf-style LoadGen harness on the tiny SDXL fixture, through the C library the README's build made.
"$venv/bin/python" -m pytest -q tests/bench
