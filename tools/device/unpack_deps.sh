# Sourced by the device scripts that build (gpu_checks.sh, own_vs_all.sh): the Debian packages carried in
# .deps/ unpacked under /tmp/deps (the README's "Building for GPUs" says how to fetch them), cuDNN found
# (the system's, else the nvidia-cudnn wheel that PyTorch brought: $cudnn_root), and the machine
# described in $OUT/env.txt.
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
cudnn_root=""
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ ! -e /usr/include/cudnn.h ]; then
  cudnn_root=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null || true)
  [ -n "$cudnn_root" ] && export LD_LIBRARY_PATH="$cudnn_root/lib:$LD_LIBRARY_PATH"
fi
echo "cuDNN root: ${cudnn_root:-system}" | tee -a "$OUT/env.txt"
