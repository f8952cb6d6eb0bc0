# Sourced by the device scripts that time whole processes (first_image.sh, startup_trace.sh), after
# runtime_env.sh, with $HD and $OUT set: the random SD1.5 folder (written by our bench, which also shows
# its load row, into $OUT/write-model.log) as $FOLDER, then one LDM single file of it as $CKPT, read
# once so that every program finds it in the page cache.
FOLDER=/tmp/hipdiffusion-random-sd15
CKPT=/tmp/sd15-random-f16.safetensors
if [ ! -e "$CKPT" ]; then
  HD_TUNE_CACHE=/tmp/throwaway.tsv $HD bench --arch sd15 --device cuda:0 --steps 1 --repeats 1 > "$OUT/write-model.log" 2>&1
  python3 tools/device/ldm_single_file.py "$FOLDER" "$CKPT" >> "$OUT/write-model.log" 2>&1 || cat "$OUT/write-model.log"
fi
cat "$CKPT" > /dev/null
