# Sourced by the device scripts that run what tools/device/gpu_checks.sh built: the Debian libraries
# unpacked from .deps/ under /tmp/deps, and cuDNN from the nvidia-cudnn wheel beside PyTorch.
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cudnn_root=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null || true)
[ -n "$cudnn_root" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cudnn_root/lib"
