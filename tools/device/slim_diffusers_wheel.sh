#!/usr/bin/env bash
# Rewrites the diffusers wheel in .whl/ without the pipelines the benchmarks do not use (all but
# stable_diffusion and stable_diffusion_xl) and without modular_pipelines: 6.4 MB becomes 2.4 MB, which
# keeps a device call's carried tree (sources, fixtures, .deps/, .whl/) under the device tool's 64 MiB.
# diffusers imports its pipelines lazily, so the removed ones are simply never found. Checked with
# bench/compare_diffusers.py's StableDiffusionXLPipeline (2026-11-24, diffusers 0.42.1).
set -euo pipefail
wheel=$(ls .whl/diffusers-*.whl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && unzip -q "$OLDPWD/$wheel")
for d in "$work"/diffusers/pipelines/*/; do
  case $(basename "$d") in stable_diffusion | stable_diffusion_xl) ;; *) rm -rf "$d" ;; esac
done
rm -rf "$work/diffusers/modular_pipelines"
rm "$wheel"
(cd "$work" && zip -q -r -9 "$OLDPWD/$wheel" diffusers diffusers-*.dist-info)
ls -l "$wheel"
