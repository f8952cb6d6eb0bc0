#!/usr/bin/env bash
# Run on the device machine after a build of ours (build/cuda, as tools/device/gpu_checks.sh makes it):
# what a user waits for, whole processes timed from the shell. stable-diffusion.cpp is built from the
# sources tools/device/pack_peer.sh packed (carry .peers; PEER=0 skips it) and both programs make the
# same image from the same single-file SD1.5 checkpoint (random weights, f16, LDM names) on this GPU:
# 512x512, 20 Euler steps, CFG 7. Ours with an empty tuning cache (quick and exhaustive), the same
# cache filled, a new size and a new batch in it (the batch twice: the second run shows what its new
# shapes cost), and a cache filled ahead by `hipdiffusion tune`. The quick runs again without near
# sizes' choices (HD_TUNE_NEAR=0, as before the autotuner asked them), each on its own copy of the same
# cache, and the in-process speed each cache gives.
# Every run's log and $OUT/first_image.tsv (name, wall seconds, exit code) land in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source "$(dirname "$0")/runtime_env.sh"
HD=./build/cuda/hipdiffusion
PROMPT="a photograph of an astronaut riding a horse"
table="$OUT/first_image.tsv"
: > "$table"

timed() {  # timed NAME COMMAND...: wall clock of the whole process, its output in $OUT/NAME.log
  local name=$1
  shift
  local start end rc
  start=$(date +%s.%N)
  "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  printf '%s\t%s\t%d\n' "$name" "$(awk "BEGIN { printf \"%.2f\", $end - $start }")" "$rc" | tee -a "$table"
}

# The peer, built once per machine (the build is not timed as a run).
SD=/tmp/peer/build/bin/sd-cli
if [ "${PEER:-1}" != 0 ] && [ ! -x "$SD" ] && [ -e .peers/stable-diffusion.cpp.tar.gz ]; then
  mkdir -p /tmp/peer && tar xzf .peers/stable-diffusion.cpp.tar.gz -C /tmp/peer
  cp /tmp/peer/stable-diffusion.cpp/PEER_VERSION "$OUT/peer-version.txt"
  cmake -S /tmp/peer/stable-diffusion.cpp -B /tmp/peer/build -DCMAKE_BUILD_TYPE=Release -DSD_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native -DSD_WEBP=OFF -DSD_WEBM=OFF > "$OUT/peer-configure.log" 2>&1
  cmake --build /tmp/peer/build --target sd-cli -j "$(nproc)" > "$OUT/peer-build.log" 2>&1 || tail -30 "$OUT/peer-build.log"
fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

source "$(dirname "$0")/random_checkpoint.sh"

ours() {  # ours CACHE [flags...]; each candidate's timing and its cost, and where the process's time went
  local cache=$1  # (src/core/startup_trace.h), traced into the log
  shift
  HD_TUNE_TRACE=1 HD_TRACE_STARTUP=1 $HD generate --model "$CKPT" --device cuda:0 --prompt "$PROMPT" --steps 20 --cfg-scale 7 --sampler euler --seed 1 \
    --width 512 --height 512 --vocab "$FOLDER/tokenizer" --tune-cache "$cache" --output "$OUT/ours.png" "$@"
}
peer() {
  "$SD" -m "$CKPT" -p "$PROMPT" --steps 20 --cfg-scale 7 --sampling-method euler -s 1 -W 512 -H 512 \
    -o "$OUT/peer.png" "$@"
}

if [ -x "$SD" ]; then
  timed peer-fa-1 peer --diffusion-fa
  timed peer-fa-2 peer --diffusion-fa
  timed peer-1 peer
fi
rm -f /tmp/quick.tsv /tmp/exhaustive.tsv /tmp/tuned.tsv /tmp/no-near*.tsv
timed ours-empty-cache-quick ours /tmp/quick.tsv
timed ours-filled-cache-1 ours /tmp/quick.tsv
timed ours-filled-cache-2 ours /tmp/quick.tsv
cp /tmp/quick.tsv /tmp/filled.tsv
cp /tmp/quick.tsv /tmp/no-near-768.tsv
cp /tmp/quick.tsv /tmp/no-near-batch-4.tsv
timed ours-new-size-768x512 ours /tmp/quick.tsv --width 768
timed ours-new-batch-4 ours /tmp/quick.tsv --batch 4
timed ours-batch-4-again ours /tmp/quick.tsv --batch 4
HD_TUNE_NEAR=0 timed ours-new-size-768x512-no-near ours /tmp/no-near-768.tsv --width 768
HD_TUNE_NEAR=0 timed ours-new-batch-4-no-near ours /tmp/no-near-batch-4.tsv --batch 4
HD_TUNE_NEAR=0 timed ours-empty-cache-quick-no-near ours /tmp/no-near.tsv
timed ours-empty-cache-exhaustive ours /tmp/exhaustive.tsv --tune exhaustive
timed ours-exhaustive-filled ours /tmp/exhaustive.tsv
timed tune-512 $HD tune --model "$CKPT" --vocab "$FOLDER/tokenizer" --device cuda:0 --size 512x512 --cfg-scale 7 \
  --tune-cache /tmp/tuned.tsv
timed ours-after-tune ours /tmp/tuned.tsv
if [ -x "$SD" ]; then
  timed peer-fa-3 peer --diffusion-fa
fi
timed ours-filled-cache-3 ours /tmp/quick.tsv
# In-process speed under each cache: the UNet step may not get slower because tuning got cheaper, nor
# because a new size or batch took near sizes' choices.
inprocess() {  # inprocess NAME CACHE [flags...]
  local name=$1 cache=$2
  shift 2
  $HD bench --model "$CKPT" --vocab "$FOLDER/tokenizer" --device cuda:0 --steps 20 --cfg-scale 7 --repeats 5 \
    --tune-cache "$cache" "$@" > "$OUT/bench-$name.txt" 2>&1
}
inprocess quick-cache /tmp/quick.tsv
inprocess no-near-cache /tmp/no-near.tsv
inprocess exhaustive-cache /tmp/exhaustive.tsv
inprocess 768x512-near /tmp/quick.tsv --width 768
inprocess 768x512-no-near /tmp/no-near-768.tsv --width 768
inprocess batch-4-near /tmp/quick.tsv --batch 4
inprocess batch-4-no-near /tmp/no-near-batch-4.tsv --batch 4
grep -H "UNet step\|whole image\|VAE decode\|of which tuning" "$OUT"/bench-*.txt > "$OUT/in-process.txt"
tar czf /tmp/caches.tgz -C /tmp quick.tsv exhaustive.tsv tuned.tsv no-near.tsv no-near-768.tsv no-near-batch-4.tsv \
  filled.tsv 2>/dev/null && mv /tmp/caches.tgz "$OUT/"
# What tuning cost, by kind of candidate (library set-up and kernel compiles included), in each run.
for log in "$OUT"/ours-*.log; do
  awk -F'\t' -v run="$(basename "$log" .log)" '$1 == "tune" {
      kind = $3; sub(/-?[0-9]+$/, "", kind); cost[kind] += $5; n[kind] += 1 }
    END { for (k in cost) printf "%s\t%s\t%d timed\t%.0f ms\n", run, k, n[k], cost[k] }' "$log"
done | sort > "$OUT/tuning-cost.txt"
grep -h "loaded in\|generated in" "$OUT"/ours-*.log > "$OUT/ours-summary.txt"
# The logs in one file (the device tool brings back a bounded number of files).
tar czf /tmp/first-image-logs.tgz -C "$OUT" $(cd "$OUT" && ls *.log bench-*.txt) && mv /tmp/first-image-logs.tgz "$OUT/" &&
  (cd "$OUT" && rm -f *.log bench-*.txt)
