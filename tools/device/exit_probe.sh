#!/usr/bin/env bash
# Run on the device machine: how long each kind of CUDA process takes to end after its last instruction
# (tools/device/exit_probe.cu says what each mode holds), three times each, into $OUT/exit_probe.tsv.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvcc -O2 -o /tmp/exit_probe "$(dirname "$0")/exit_probe.cu" || exit 1
for mode in 0 1 2 3 4; do
  for i in 1 2 3; do
    last=$(/tmp/exit_probe $mode)
    end=$(date +%s.%N)
    printf '%s\t%s\n' "$mode" "$(awk "BEGIN { printf \"%.3f\", $end - $last }")"
  done
done | tee "$OUT/exit_probe.tsv"
