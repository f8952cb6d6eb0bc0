#!/usr/bin/env bash
# Run here, not on the device. Packs a commit's sources (no fixtures, models or benchmark results: about
# 1.3 MB) as .variant-NAME.tar.gz at the top of the checkout, for tools/device/compare_builds.sh, which
# builds it beside the checked-out tree on the device.
#   tools/device/pack_variant.sh NAME COMMIT      e.g. tools/device/pack_variant.sh main main
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NAME COMMIT" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
git archive "$2" -- . ':!tests/fixtures' ':!models' ':!bench/results' | gzip > ".variant-$1.tar.gz"
echo ".variant-$1.tar.gz: $(git rev-parse --short "$2"), $(du -h ".variant-$1.tar.gz" | cut -f1)"
