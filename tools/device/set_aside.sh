#!/usr/bin/env bash
# Run here, not on the device. A device call carries the tracked and untracked-not-ignored files plus
# .deps/ (and .whl/), under the device tool's 64 MiB; with the SDXL refiner's fixtures that is 69 MiB.
# The GPU tests do not read the single-file checkpoints among the fixtures (9.5 MB), so for a device
# call that runs the `gpu` label (not gpu_checks.sh's `cpu` label, which reads them):
#   tools/device/set_aside.sh out    # takes them out of the index and ignores them locally
#   ... the device call ...
#   tools/device/set_aside.sh back   # tracks them again
# Never commit between the two: the commit would delete them.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
files=(tests/fixtures/models/tiny_sd1.safetensors tests/fixtures/models/tiny_sd2.safetensors
       tests/fixtures/models/tiny_sdxl_refiner.safetensors)
exclude="$(git rev-parse --git-dir)/info/exclude"
case "${1:-}" in
  out)
    git rm -q --cached "${files[@]}"
    mkdir -p "$(dirname "$exclude")"
    printf '%s\n' "${files[@]}" >> "$exclude"
    ;;
  back)
    if [ -f "$exclude" ]; then
      for f in "${files[@]}"; do grep -vxF "$f" "$exclude" > "$exclude.new" || true; mv "$exclude.new" "$exclude"; done
    fi
    git add "${files[@]}"
    ;;
  *)
    echo "usage: $0 out|back" >&2
    exit 2
    ;;
esac
