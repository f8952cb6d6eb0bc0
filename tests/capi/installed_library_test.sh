#!/usr/bin/env bash
# The C API as a user gets it: `cmake --install` of this build into a fresh prefix, then C programs built
# against it from outside the project: tests/capi/c_api_test.c through pkg-config, and the example
# examples/c/generate.c through find_package(hipdiffusion). The CLI installed beside them draws the
# reference picture the C test compares with.
#   installed_library_test.sh BUILD_DIR SOURCE_DIR [SANITIZER_FLAGS]
set -euo pipefail
build=$1 source=$2 sanitize=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libhipdiffusion.so' | head -1)")
[ -f "$prefix/include/hipdiffusion/hipdiffusion.h" ] || { echo "the header was not installed"; exit 1; }
# Only the C API leaves the library: no C++ symbol of the engine, OpenBLAS or ICU.
exported=$(nm -D --defined-only "$libdir/libhipdiffusion.so" | awk '$2 == "T" {print $3}')
stray=$(printf '%s\n' "$exported" | grep -v '^hd_' || true)
[ -z "$stray" ] || { echo "libhipdiffusion.so exports more than hd_*:"; printf '%s\n' "$stray" | head; exit 1; }

model=$source/tests/fixtures/models/tiny_sd1
"$prefix/bin/hipdiffusion" generate --model "$model" --prompt "a red square" --negative-prompt blurry --seed 7 \
  --steps 3 --width 32 --height 32 --sampler euler_a --output "$work/cli.png" > /dev/null 2>&1
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046,SC2086 # pkg-config's flags are separate words
cc -std=c11 -Wall -Wextra -Werror $sanitize "$source/tests/capi/c_api_test.c" -o "$work/c_api_test" \
  $(pkg-config --cflags --libs hipdiffusion libpng) -lpthread
# SDXL's base and refiner: the CLI's refined picture for the C test's REFINED settings.
xl=$source/tests/fixtures/models
"$prefix/bin/hipdiffusion" generate --model "$xl/tiny_sdxl_pipeline" --refiner "$xl/tiny_sdxl_refiner" \
  --high-noise-frac 0.5 --prompt "a red square" --negative-prompt blurry --seed 5 --steps 4 --width 32 --height 32 \
  --sampler euler_a --output "$work/refined.png" > /dev/null 2>&1
# A LoRA of the fixtures' folder (the C test asks for it by name): the CLI's picture with it.
"$prefix/bin/hipdiffusion" generate --model "$model" --lora "$xl/tiny_sd1_lora_kohya.safetensors:0.7" \
  --prompt "a red square" --negative-prompt blurry --seed 7 --steps 3 --width 32 --height 32 --sampler euler_a \
  --output "$work/lora.png" > /dev/null 2>&1
LD_LIBRARY_PATH=$libdir "$work/c_api_test" "$model" "$work/cli.png" "$xl/tiny_sdxl_pipeline" \
  "$xl/tiny_sdxl_refiner" "$work/refined.png" "$xl" "$work/lora.png"

cmake -S "$source/tests/capi/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize" > "$work/consumer.log" \
  || { cat "$work/consumer.log"; exit 1; }
cmake --build "$work/consumer" > "$work/consumer-build.log" || { cat "$work/consumer-build.log"; exit 1; }
LD_LIBRARY_PATH=$libdir "$work/consumer/generate" "$model" "a blue circle" "$work/example.ppm" cpu 2 32
head -c 2 "$work/example.ppm" | grep -q P6 || { echo "the example wrote no PPM"; exit 1; }
echo "the installed C API works from pkg-config and find_package"
