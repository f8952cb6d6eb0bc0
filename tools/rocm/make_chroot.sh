#!/usr/bin/env bash
# Makes (or reuses) a Debian sid chroot holding a current ROCm (7.2.x from Debian's experimental
# archive: hipcc/clang, HIP, hipBLASLt, rocBLAS, MIOpen, RCCL) with CMake >= 4 and the project's own
# build dependencies, for building the `hip` preset on a Debian 12 machine whose own ROCm (5.2) is too
# old. Everything comes from the Debian mirror that this machine's apt sources already name.
#
#   tools/rocm/make_chroot.sh [DIR]    DIR defaults to $HD_ROCM_CHROOT, else /var/cache/hipdiffusion/rocm-sid
#
# Idempotent: a chroot made from the same package list is reused (a stamp file records the list), so
# a machine that keeps it pays the ~2 minutes once. Needs root (mmdebstrap --mode=root). Prints DIR.
set -euo pipefail
dir=${1:-${HD_ROCM_CHROOT:-/var/cache/hipdiffusion/rocm-sid}}

# ROCm from experimental (sid lags behind); the rest of the build from sid. The kernel data of rocBLAS,
# hipBLASLt and MIOpen's databases are not unpacked: nothing runs here, and they are most of the size.
rocm_packages="hipcc libamdhip64-dev libhipblaslt-dev libhipblas-common-dev librocblas-dev libmiopen-dev librccl-dev"
build_packages="cmake,ninja-build,g++,make,pkgconf,python3,libopenblas-dev,nlohmann-json3-dev,libicu-dev,libpng-dev,libgtest-dev,libcpp-httplib-dev,libssl-dev"
stamp_text="rocm: $rocm_packages | build: $build_packages"

if [ -f "$dir/.hipdiffusion-stamp" ] && [ "$(cat "$dir/.hipdiffusion-stamp")" = "$stamp_text" ]; then
  echo "$dir"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "make_chroot.sh: needs root (mmdebstrap --mode=root)" >&2; exit 1; }

# The mirror this machine uses for Debian itself (deb822 or one-line sources), never a hard-coded host.
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -v security | head -n1 || true)
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null |
    grep -v security | head -n1 || true)
fi
[ -n "$mirror" ] || { echo "make_chroot.sh: no Debian mirror found in the apt sources" >&2; exit 1; }

if ! command -v mmdebstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null; }
fi

# A half-made or outdated chroot is made again from nothing. Never remove through a mount: a
# repository that run_in_chroot.sh bind-mounted (and an interrupted run left) would go with it.
mounts_under() { awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r; }
for m in $(mounts_under); do umount "$m" || umount -l "$m" || true; done
if [ -n "$(mounts_under)" ]; then
  echo "make_chroot.sh: still mounted under $dir, not removing it:" $(mounts_under) >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mmdebstrap --mode=root --variant=minbase --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/rocblas/*' \
  --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/hipblaslt/library/*' \
  --dpkgopt='path-exclude=/usr/share/miopen/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --include="$build_packages" \
  --customize-hook="chroot \"\$1\" apt-get install -y -q --no-install-recommends -t experimental $rocm_packages" \
  sid "$dir" "deb $mirror sid main" "deb $mirror experimental main" >&2
echo "$stamp_text" >"$dir/.hipdiffusion-stamp"
echo "$dir"
