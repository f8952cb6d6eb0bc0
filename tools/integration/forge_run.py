#!/usr/bin/env python3
"""Runs Stable Diffusion WebUI Forge (Forge2, its backend/) for real, headless, with and without
hipDiffusion's extension, and compares what it makes.

Starts Forge's own API server (`launch.py --nowebui --api`, from the checkout given, with a data folder of
the run's own that the extension and the checkpoint are linked into) and generates through
POST /sdapi/v1/txt2img, the same request and seed each time. Forge's backend runs neither of A1111's hooks
(cross-attention optimizations, SD Unet), so the extension is a script: its panel's choice is sent as
the request's alwayson_scripts (Forge matches the name to the script's title, lower-cased):
  stock      no alwayson script                                (Forge alone)
  attention  {"hipDiffusion": {"args": ["Attention"]}}          (attn1/attn2 replaced in every block)
  engine     {"hipDiffusion": {"args": ["Whole UNet"]}}         (the whole UNet through the engine)
  stock_after  Forge alone again, after the engine (which puts the convolution weights of Forge's own
             model in channels_last memory, in place): Forge's own UNet must still make the same picture
The check: the same picture within one level of 255 (float32 on the CPU; --device gpu allows more), the
generation's infotext saying which hipDiffusion mode ran, the extension's "through the engine" lines in
Forge's console (printed: Forge shows Python's INFO logs only with --loglevel INFO, which is not passed,
so the console is what a user sees), no fallback of ours. Exits non-zero, saying which check failed,
otherwise. Writes a JSON summary with the timings (each configuration's median of --repeats runs after
one that pays the shapes' first use).

Forge loads no model at the start of its API-only server (its model parameters are set by the UI's
main_entry, which --nowebui never builds): the checkpoint is chosen through POST /sdapi/v1/options
(sd_model_checkpoint), which sets them; it is therefore found in the data folder's models, not given with
--ckpt (a --ckpt checkpoint is already "selected", so that POST would change nothing and load nothing).

The random checkpoint's text encoder ends in a LayerNorm of weight 1 and bias 0, so the conditioning's
mean is 0 within rounding, and Forge's default emphasis ("Original", which rescales by the ratio of the
means before and after the prompt's weights) divides 0 by 0: NaN conditioning and black pictures whatever
runs the UNet. The run sets Forge's emphasis to "No norm" (the same weights, no rescaling); a real
checkpoint does not need it.

Usage (what tools/integration/forge.sh runs):
  forge_run.py --forge DIR --python VENV_PYTHON --extension DIR --checkpoint FILE --out DIR [--device cpu|gpu]
"""
import argparse
import base64
import json
import shutil
from pathlib import Path

from ui_server import (add_run_arguments, compare_pictures, engine_lines, finish, free_port, load_image, request,
                       set_options, start, stop, timed_ratios, txt2img_body, txt2img_timed)

PIXEL_LEVELS = {"cpu": 1, "gpu": 8}
CONFIGURATIONS = {
    "stock": None,
    "attention": {"hipDiffusion": {"args": ["Attention"]}},
    "engine": {"hipDiffusion": {"args": ["Whole UNet"]}},
    "stock_after": None,
}
# emphasis: see the docstring (the random checkpoint's conditioning). live previews off: on a GPU Forge
# fetches a preview model (VAE-approx) from the network at the first generation, which a machine without
# one answers with an error; the pictures do not depend on it.
SETTINGS = {"emphasis": "No norm", "live_previews_enable": False}
INFOTEXT = {"attention": "hipDiffusion: Attention", "engine": "hipDiffusion: Whole UNet"}
RAN = {"attention": "hipdiffusion: Forge's attention through the engine's kernel",
       "engine": "hipdiffusion: Forge's UNet through the engine"}


def prepare_data(out: Path, extension: Path, checkpoint: Path) -> Path:
    """A data folder of this run's own (settings, extensions, models): nothing of an earlier run or of
    the checkout's own settings carries over. Returns the checkpoint's link in it."""
    shutil.rmtree(out, ignore_errors=True)
    (out / "data" / "extensions").mkdir(parents=True)
    (out / "data" / "extensions" / "hipdiffusion").symlink_to(extension.resolve())
    models = out / "data" / "models" / "Stable-diffusion"
    models.mkdir(parents=True)
    link = models / checkpoint.name
    link.symlink_to(checkpoint.resolve())
    return link


def forge_command(python: str, port: int, data: Path, device: str, more: str) -> list:
    """launch.py without its environment preparation (clones, pip installs, version checks: done by
    forge.sh), the API alone, Forge's default logging (warnings: our fallback lines)."""
    command = [python, "launch.py", "--nowebui", "--api", "--port", str(port), "--data-dir", str(data),
               "--skip-prepare-environment", "--skip-install", "--skip-version-check", "--skip-python-version-check",
               "--skip-torch-cuda-test", "--no-download-sd-model"]
    if device == "cpu":
        command += ["--always-cpu", "--all-in-fp32"]
    return command + more.split()


def select_checkpoint(base: str, link: Path) -> str:
    """Chooses the checkpoint through the API (which sets Forge's model parameters); returns its title."""
    models = request(f"{base}/sdapi/v1/sd-models")
    titles = [m["title"] for m in models if Path(m["filename"]).name == link.name]
    if not titles:
        raise SystemExit(f"Forge does not list {link.name} (it lists {[m['filename'] for m in models]})")
    request(f"{base}/sdapi/v1/options", {"sd_model_checkpoint": titles[0]}, timeout=600)
    return titles[0]


def infotext(result: dict) -> str:
    info = json.loads(result.get("info") or "{}")
    return (info.get("infotexts") or [""])[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forge", required=True, type=Path)
    add_run_arguments(parser, "forge")
    args = parser.parse_args()

    out = args.out.resolve()
    link = prepare_data(out, args.extension, args.checkpoint)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = forge_command(args.python, port, out / "data", args.device, args.forge_args)
    body = txt2img_body(args.size, args.steps)
    log_path = out / "forge.log"
    pictures, seconds, infotexts = {}, {}, {}
    with open(log_path, "w") as log:
        server = start(command, args.forge, log, f"{base}/sdapi/v1/options", "Forge")
        try:
            title = select_checkpoint(base, link)
            set_options(base, SETTINGS, "Forge")
            for kind, scripts in CONFIGURATIONS.items():
                request_body = dict(body, **({"alwayson_scripts": scripts} if scripts else {}))
                result, seconds[kind] = txt2img_timed(base, request_body, args.repeats)
                picture = base64.b64decode(result["images"][0])
                (out / f"{kind}.png").write_bytes(picture)
                pictures[kind] = load_image(picture)
                infotexts[kind] = infotext(result)
                print(f"{kind}: {['%.2f' % s for s in seconds[kind]]} s", flush=True)
        finally:
            stop(server)

    log_text = log_path.read_text()
    failures = []
    checks = compare_pictures(pictures, [(kind, "stock") for kind in ("attention", "engine", "stock_after")],
                              PIXEL_LEVELS[args.device], failures)
    for kind, text in INFOTEXT.items():
        seen = text in infotexts[kind]
        print(f"infotext of {kind} says {text!r}: {seen}")
        if not seen:
            failures.append(f"the {kind} generation's infotext lacks {text!r} (it is {infotexts[kind]!r})")
    for kind in ("stock", "stock_after"):
        if "hipDiffusion" in infotexts[kind]:
            failures.append(f"the {kind} generation mentions hipDiffusion: {infotexts[kind]!r}")
    ran, fell_back = engine_lines(log_text, RAN, "forge.", failures)
    # Forge catches a script's exception and goes on without it: "Error running <hook>: <script file>".
    errors = [line for line in log_text.splitlines()
              if line.startswith("Error ") and "hipdiffusion" in line.lower()]
    for line in errors:
        print("error:", line)
    failures += errors
    ratios = timed_ratios(seconds, [("attention", "stock"), ("engine", "stock")])
    summary = {"device": args.device, "size": args.size, "steps": args.steps, "checkpoint": title, "settings": SETTINGS,
               "seconds": seconds, "ratios": ratios, "checks": checks, "infotexts": infotexts,
               "engine_ran": ran, "engine_builds": log_text.count(RAN["engine"]), "fallbacks": fell_back, "errors": errors, "command": command}
    finish(out, summary, failures, "Forge with hipDiffusion's extension matches Forge alone")


if __name__ == "__main__":
    main()
