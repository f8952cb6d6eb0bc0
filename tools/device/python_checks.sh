#!/usr/bin/env bash
# On the device machine: builds the PyTorch extension against the machine's PyTorch with the CUDA
# kernels (plain CMake: scikit-build-core is not there, and the machine reaches no package registry) and
# the CLI beside it in build/pytorch, runs python/tests (the GPU tests included) and the benchmarks. Logs
# go to $OUT.
#   GPU_TESTS=1       also builds hd_gpu_tests there and runs the `gpu` label first
#   NO_TESTS=1        the benchmarks alone; NO_BENCH=1: the tests alone
#   BENCH_ARGS=...    diffusers_optimize_bench.py's arguments
#   PIPELINE="sd15 sdxl"  whole images through diffusers five ways (bench/diffusers_pipeline_bench.py)
#                     instead of the op and optimize benchmarks; COMPILE=1 adds torch.compile there
#   BACKWARD=1        attention's gradient beside SDPA's backends (bench/attention_backward_bench.py) instead
#   BACKWARD_ARGS=... its arguments (--kernels: each kernel's time)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh > /dev/null
python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl pytest > "$OUT/pip.log" 2>&1
# diffusers from the wheels carried in .whl (README, "Building for GPUs"): the diffusers tests (which skip
# without it) and the optimize benchmark.
if ls .whl/diffusers-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/diffusers-*.whl .whl/importlib_metadata-*.whl .whl/zipp-*.whl >> "$OUT/pip.log" 2>&1
fi
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" | tee -a "$OUT/env.txt"
tests=OFF targets="hipdiffusion_torch hipdiffusion"
[ -n "${GPU_TESTS:-}" ] && tests=ON targets="$targets hd_gpu_tests"
cmake -S . -B build/pytorch -G Ninja -DHD_PYTHON=ON -DHD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DHD_BUILD_TESTS=$tests \
  -DHD_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/py_configure.log" 2>&1 \
  || { tail -30 "$OUT/py_configure.log"; exit 1; }
cmake --build build/pytorch --target $targets -j 16 > "$OUT/py_build.log" 2>&1 || { grep -m20 -B2 -A8 error "$OUT/py_build.log"; exit 1; }
cp build/pytorch/python/_ops.so python/hipdiffusion/_ops.so
source tools/device/runtime_env.sh
export PYTHONPATH=$PWD/python:/tmp/site HD_TUNE_CACHE=/tmp/python_tuning.tsv
if [ -n "${GPU_TESTS:-}" ]; then
  (cd build/pytorch && ctest -L gpu --output-on-failure > "$OUT/ctest-gpu.log" 2>&1); echo "ctest gpu exit $?" | tee -a "$OUT/ctest-gpu.log"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest-gpu.log" | head -20
fi
if [ -z "${NO_TESTS:-}" ]; then
  python3 -m pytest -q python/tests > "$OUT/pytest.log" 2>&1; echo "pytest exit $?" | tee -a "$OUT/pytest.log"
  tail -25 "$OUT/pytest.log"
fi
[ -n "${NO_BENCH:-}" ] && exit 0
if [ -n "${BACKWARD:-}" ]; then
  for dtype in f16 bf16; do
    python3 bench/attention_backward_bench.py --dtype $dtype ${BACKWARD_ARGS:-} --json-out "$OUT/attention_backward_$dtype.json" 2>&1 \
      | tee "$OUT/attention_backward_$dtype.md"
  done
  exit 0
fi
if [ -n "${PIPELINE:-}" ]; then
  for arch in $PIPELINE; do
    python3 bench/diffusers_pipeline_bench.py --arch "$arch" --build build/pytorch ${COMPILE:+--compile} \
      --json-out "$OUT/pipeline_$arch.json" 2>&1 | tee "$OUT/pipeline_$arch.md"
  done
  exit 0
fi
[ -z "${NO_TESTS:-}" ] && python3 bench/torch_ops_bench.py --json-out "$OUT/torch_ops_f16.json" 2>&1 | tee "$OUT/torch_ops_bench.md"
python3 bench/diffusers_optimize_bench.py ${BENCH_ARGS:-} --json-out "$OUT/diffusers_optimize.json" 2>&1 | tee "$OUT/diffusers_optimize.md"
