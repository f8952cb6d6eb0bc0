#!/usr/bin/env bash
# Runs a command inside the ROCm chroot (tools/rocm/make_chroot.sh) with the repository mounted at the
# same path as outside, so build trees and their paths are the same from both sides.
#
#   tools/rocm/run_in_chroot.sh 'cmake --preset hip && cmake --build --preset hip'
#
# The chroot is $HD_ROCM_CHROOT, else /var/cache/hipdiffusion/rocm-sid. /proc is mounted for the
# command's life (hipcc and CMake's HIP detection need it). Needs root.
set -euo pipefail
[ $# = 1 ] || { echo "usage: run_in_chroot.sh 'COMMAND'" >&2; exit 2; }
dir=${HD_ROCM_CHROOT:-/var/cache/hipdiffusion/rocm-sid}
[ -f "$dir/.hipdiffusion-stamp" ] || { echo "run_in_chroot.sh: no chroot at $dir: run tools/rocm/make_chroot.sh" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/../.." && pwd)

mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; --i)); do umount "${mounted[i]}" || true; done; }
trap cleanup EXIT
mkdir -p "$dir/proc" "$dir$repo"
if ! mountpoint -q "$dir/proc"; then mount -t proc proc "$dir/proc"; mounted+=("$dir/proc"); fi
if ! mountpoint -q "$dir$repo"; then mount --bind "$repo" "$dir$repo"; mounted+=("$dir$repo"); fi
chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  bash -euo pipefail -c "cd '$repo'
$1"  # on a line of its own: a command with '&' or ';' must run wholly in the repository
