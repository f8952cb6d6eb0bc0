#!/usr/bin/env python3
"""Runs AUTOMATIC1111's web UI for real, headless, with and without hipDiffusion's extension, and compares
what it makes.

Starts A1111's own API server (`launch.py --nowebui --api`, from the checkout given, with a data folder of
the run's own that the extension is linked into) and generates through POST /sdapi/v1/txt2img, the same request and seed
each time, with the settings set through POST /sdapi/v1/options (which runs A1111's own change handlers):
  stock      Cross attention optimization "Automatic", SD Unet "None"             (A1111 alone)
  stock_sdp  Cross attention optimization "sdp - scaled dot product" (A1111 alone, PyTorch's SDPA)
  attention  Cross attention optimization "hipDiffusion"
  engine     SD Unet "hipDiffusion" (the whole UNet through the engine)
  lora_*     stock and engine with a random LoRA on the UNet's attention (make_lora.py) in the prompt,
             `<lora:hd-random-lora:1>`, which A1111's Lora extension applies to the weights
The check: the same picture within one level of 255 (float32 on the CPU; --device gpu allows more) for
each of ours and its stock counterpart, a LoRA picture unlike the one without (the LoRA did something),
the extension's "through the engine" lines in A1111's console, no fallback of ours. Exits non-zero, saying
which check failed, otherwise. Writes a JSON summary with the timings (each configuration's last of
median of --repeats runs after one that pays the shapes' first use).

Usage (what tools/integration/a1111.sh runs):
  a1111_run.py --a1111 DIR --python VENV_PYTHON --extension DIR --checkpoint FILE --lora FILE --out DIR
              [--device cpu|gpu]
"""
import argparse
import base64
import shutil
from pathlib import Path

from ui_server import (add_run_arguments, compare_pictures, engine_lines, finish, free_port, load_image, request,
                       set_options, start, stop, timed_ratios, txt2img_body, txt2img_timed)

PIXEL_LEVELS = {"cpu": 1, "gpu": 8}
STOCK = {"cross_attention_optimization": "Automatic", "sd_unet": "None"}
ENGINE = {"cross_attention_optimization": "Automatic", "sd_unet": "hipDiffusion"}
# name: (settings, with the LoRA in the prompt)
CONFIGURATIONS = {
    "stock": (STOCK, False),
    # "Automatic" takes the available optimization of the highest priority: without xformers that is
    # Doggettx's split attention, not PyTorch's SDPA; A1111 with SDPA chosen is timed too.
    "stock_sdp": ({"cross_attention_optimization": "sdp - scaled dot product", "sd_unet": "None"}, False),
    "attention": ({"cross_attention_optimization": "hipDiffusion", "sd_unet": "None"}, False),
    "engine": (ENGINE, False),
    "lora_stock": (STOCK, True),
    "lora_engine": (ENGINE, True),
}
# (ours, stock's): the same picture within PIXEL_LEVELS
SAME = [("stock_sdp", "stock"), ("attention", "stock"), ("engine", "stock"), ("lora_engine", "lora_stock")]
# (ours, theirs) whose times are compared: each against A1111 as it comes, and against A1111 with SDPA.
RATIOS = [("attention", "stock"), ("engine", "stock"), ("lora_engine", "lora_stock"), ("attention", "stock_sdp"),
          ("engine", "stock_sdp")]
# Live previews off: on a GPU the web UI fetches a preview model (VAE-approx) from the network at the first
# generation, which a machine without one answers with an error; the pictures do not depend on it.
SETTINGS = {"live_previews_enable": False}
LORA = "hd-random-lora"
RAN = {"attention": "hipdiffusion: A1111's cross-attention through the engine's kernel",
       "engine": "hipdiffusion: A1111's UNet through the engine"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a1111", required=True, type=Path)
    add_run_arguments(parser, "a1111")
    parser.add_argument("--lora", type=Path, help="a LoRA for the checkpoint (make_lora.py: SD1.x's); without it "
                        "the lora_* configurations are left out")
    args = parser.parse_args()

    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    # A data folder of this run's own (settings, extensions): nothing of an earlier run or of the
    # checkout's own settings carries over; the extension is linked into it.
    (out / "data" / "extensions").mkdir(parents=True)
    (out / "data" / "extensions" / "hipdiffusion").symlink_to(args.extension.resolve())
    (out / "data" / "Lora").mkdir()
    if args.lora:
        (out / "data" / "Lora" / f"{LORA}.safetensors").symlink_to(args.lora.resolve())
    configurations = {k: v for k, v in CONFIGURATIONS.items() if args.lora or not v[1]}
    same = [(ours, theirs) for ours, theirs in SAME if ours in configurations]
    compared = [(ours, theirs) for ours, theirs in RATIOS if ours in configurations]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [args.python, "launch.py", "--nowebui", "--api", "--port", str(port), "--ckpt", str(args.checkpoint.resolve()),
               "--skip-prepare-environment", "--skip-install", "--skip-version-check", "--skip-python-version-check",
               "--no-download-sd-model", "--data-dir", str(out / "data"), "--lora-dir", str(out / "data" / "Lora")]
    if args.device == "cpu":
        command += ["--use-cpu", "all", "--skip-torch-cuda-test", "--no-half", "--precision", "full"]
    command += args.a1111_args.split()
    body = txt2img_body(args.size, args.steps)
    log_path = out / "a1111.log"
    pictures, seconds = {}, {}
    with open(log_path, "w") as log:
        server = start(command, args.a1111, log, f"{base}/sdapi/v1/options", "A1111")
        try:
            choices = request(f"{base}/sdapi/v1/options")
            for kind, (settings, lora) in configurations.items():
                set_options(base, dict(SETTINGS, **settings), "A1111")
                prompt = f"<lora:{LORA}:1> {body['prompt']}" if lora else body["prompt"]
                result, seconds[kind] = txt2img_timed(base, dict(body, prompt=prompt), args.repeats)
                picture = base64.b64decode(result["images"][0])
                (out / f"{kind}.png").write_bytes(picture)
                pictures[kind] = load_image(picture)
                print(f"{kind}: {['%.2f' % s for s in seconds[kind]]} s", flush=True)
        finally:
            stop(server)

    log_text = log_path.read_text()
    failures = []
    checks = compare_pictures(pictures, same, PIXEL_LEVELS[args.device], failures)
    lora_effect = None
    if args.lora:
        lora_effect = float(abs(pictures["lora_stock"] - pictures["stock"]).mean())
        print(f"the LoRA's effect on stock's picture: {lora_effect:.1f} levels on average")
        if lora_effect < 2.0:
            failures.append("the LoRA changed nothing: its comparison would show nothing")
    ran, fell_back = engine_lines(log_text, RAN, "a1111.", failures)
    ratios = timed_ratios(seconds, compared)
    summary = {"device": args.device, "size": args.size, "steps": args.steps, "seconds": seconds,
               "ratios": ratios, "checks": checks, "lora_effect_levels": lora_effect, "engine_ran": ran,
               "fallbacks": fell_back,
               "settings_before": {k: choices.get(k) for k in ("cross_attention_optimization", "sd_unet")}}
    finish(out, summary, failures, "AUTOMATIC1111 with hipDiffusion's extension matches AUTOMATIC1111 alone")


if __name__ == "__main__":
    main()
