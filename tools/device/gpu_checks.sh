#!/usr/bin/env bash
# Run on the device machine (NVIDIA H100/H200, no package registry): builds the `cuda` preset against
# the Debian packages carried in .deps/ (unpack_deps.sh), runs the gpu and cpu test labels, and leaves
# logs in $OUT.
set -euo pipefail
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/unpack_deps.sh"
cmake --preset cuda -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
grep -i cudnn "$OUT/configure.log" | tee -a "$OUT/env.txt"
cmake --build --preset cuda -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
status=0
ctest --preset cuda-gpu --output-on-failure 2>&1 | tee "$OUT/ctest-gpu.log" || status=1
ctest --preset cuda-cpu -j 16 2>&1 | tail -5 | tee "$OUT/ctest-cpu.log" || status=1
exit $status
