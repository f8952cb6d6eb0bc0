#!/usr/bin/env bash
# Installs what building and testing hipDiffusion's CPU build needs on Debian 12, from Debian's own
# packages. Run as root. The README says why each package is there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# Debian's nginx starts its service when installed; the server's test starts its own on loopback ports.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -q --no-install-recommends \
  ca-certificates g++ make cmake ninja-build pkg-config python3 python3-venv \
  libopenblas-dev nlohmann-json3-dev libicu-dev libpng-dev libgtest-dev libcpp-httplib-dev libssl-dev \
  nginx-light
