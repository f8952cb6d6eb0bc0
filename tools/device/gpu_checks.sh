#!/usr/bin/env bash
# Run on the device machine (NVIDIA H100/H200, no package registry): builds the `cuda` preset against
# Debian packages carried in .deps/ (the README's "Building for GPUs" says how to fetch them), runs the
# gpu and cpu test labels, and leaves logs in $OUT.
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/deps
for f in .deps/*.deb; do dpkg-deb -x "$f" /tmp/deps; done
# A package may come pre-extracted and trimmed (libicu-dev without its static libraries, to keep the
# carried tree small): a tarball of the package's file tree.
for f in .deps/*.tar.gz; do [ -e "$f" ] && tar xzf "$f" -C /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
} 2>&1 | tee "$OUT/env.txt"
# cuDNN: the system's if it has one, else the nvidia-cudnn wheel that PyTorch brought.
cudnn_root=""
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ ! -e /usr/include/cudnn.h ]; then
  cudnn_root=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null || true)
  [ -n "$cudnn_root" ] && export LD_LIBRARY_PATH="$cudnn_root/lib:$LD_LIBRARY_PATH"
fi
echo "cuDNN root: ${cudnn_root:-system}" | tee -a "$OUT/env.txt"
cmake --preset cuda -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
grep -i cudnn "$OUT/configure.log" | tee -a "$OUT/env.txt"
cmake --build --preset cuda -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
status=0
ctest --preset cuda-gpu --output-on-failure 2>&1 | tee "$OUT/ctest-gpu.log" || status=1
ctest --preset cuda-cpu -j 16 2>&1 | tail -5 | tee "$OUT/ctest-cpu.log" || status=1
exit $status
