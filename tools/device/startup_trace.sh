#!/usr/bin/env bash
# Run on the device machine after a build of ours (build/cuda): where a whole `generate` process's time
# goes, with HD_TRACE_STARTUP=1 (src/core/startup_trace.h) marking loading, library start-up, each cuDNN
# plan, the graph capture and the steps. The same random SD1.5 single file and settings as
# first_image.sh: an empty tuning cache, the same cache filled (three times), batch 4 in it (its new
# shapes' candidates traced) and batch 4 again (what the new shapes' tuning cost); plus a process that
# only prints its version (the cost of starting it with its libraries). Each run's wall clock in
# $OUT/startup.tsv; the logs in one archive. (The driver's eager module loading,
# CUDA_MODULE_LOADING=EAGER, made a filled-cache run 5.6 s instead of 1.7-2.0 s: not an option.)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source "$(dirname "$0")/runtime_env.sh"
HD=./build/cuda/hipdiffusion
source "$(dirname "$0")/random_checkpoint.sh"
table="$OUT/startup.tsv"
: > "$table"
timed() {  # timed NAME COMMAND...: the whole process's wall clock; its output in /tmp/trace/NAME.log
  local name=$1 start end
  shift
  mkdir -p /tmp/trace
  start=$(date +%s.%N)
  "$@" > "/tmp/trace/$name.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  printf '%s\t%s\t%d\n' "$name" "$(awk "BEGIN { printf \"%.3f\", $end - $start }")" "$rc" | tee -a "$table"
}
ours() {
  HD_TRACE_STARTUP=1 $HD generate --model "$CKPT" --device cuda:0 --prompt "a photograph of an astronaut riding a horse" \
    --steps 20 --cfg-scale 7 --sampler euler --seed 1 --width 512 --height 512 --vocab "$FOLDER/tokenizer" \
    --tune-cache /tmp/trace-cache.tsv --output /tmp/trace/ours.png "$@"
}
for i in 1 2 3; do timed version-$i $HD --version; done
rm -f /tmp/trace-cache.tsv
timed empty-cache ours
timed filled-1 ours
timed filled-2 ours
timed filled-3 ours
HD_TUNE_TRACE=1 timed batch-4 ours --batch 4
timed batch-4-filled ours --batch 4
tar czf "$OUT/startup-logs.tgz" -C /tmp/trace $(cd /tmp/trace && ls *.log)
# The traces of a filled-cache run and of batch 4, the progress bar and candidate timings left out.
for f in filled-2 batch-4; do
  echo "== $f"
  tr '\r' '\n' < "/tmp/trace/$f.log" | sed 's/ startup /\nstartup /' | grep -v "^step\|^tune" | head -150
done
