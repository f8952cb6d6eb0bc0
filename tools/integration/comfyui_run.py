#!/usr/bin/env python3
"""Runs ComfyUI for real, headless, with and without hipDiffusion's nodes, and compares what it makes.

Starts ComfyUI's own server (`main.py`, from the checkout given) with the node package linked into its
custom_nodes, queues workflows through its HTTP API (POST /prompt, GET /history) and reads the outputs
it saves:
  stock      checkpoint -> KSampler -> VAEDecode                       (ComfyUI alone)
  attention  the same model through the HipDiffusionAttention node
  engine     the model through HipDiffusionUNet, decoded by HipDiffusionVAEDecode
  encode     a seeded random picture through VAEEncode and through HipDiffusionVAEEncode
Each saves its latents (SaveLatent: float32) and pictures (SaveImage). The check: the same seed gives the
same latents within float32 tolerance (relative L2), pictures within one level of 255, and ComfyUI's
log shows the engine ran (its "through the engine" lines) with no fallback of the engine's UNet or VAE.
Exits non-zero, saying which check failed, otherwise. Writes a JSON summary with the timings.

Usage (what tools/integration/comfyui.sh runs):
  comfyui_run.py --comfyui DIR --python VENV_PYTHON --checkpoint NAME --out DIR [--device cpu|gpu]
"""
import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from ui_server import engine_lines, finish, free_port, load_image, request, start, stop

# Tolerances. Latents: our CPU kernels and PyTorch's sum in different orders (float32); a few sampler
# steps carry that forward. On a GPU both compute in float16/bfloat16. The encoder: ComfyUI runs the VAE
# in bfloat16 on a recent GPU, and so do we; two bfloat16 runs of its 30-odd layers (8-bit mantissas)
# differed by 2.0e-2 and 2.3e-2 on an H100 (SD1.5, SDXL), where the same comparison in float32 on the
# CPU gives 4e-6: rounding, not a different computation.
LATENT_TOLERANCE = {"cpu": 1e-4, "gpu": 2e-2}
ENCODE_TOLERANCE = {"cpu": 1e-4, "gpu": 5e-2}
PIXEL_LEVELS = {"cpu": 1, "gpu": 8}
# The engine's lines in ComfyUI's log that say each node computed (ui_server.engine_lines).
RAN = {"attention": "hipdiffusion: ComfyUI's attention through the engine's kernel",
       "UNet": "hipdiffusion: ComfyUI's UNet through the engine",
       "VAE": "hipdiffusion: ComfyUI's VAE through the engine"}


def workflow(kind: str, checkpoint: str, prefix: str, size: int, steps: int, seed: int = 1234) -> dict:
    """A ComfyUI API-format workflow (node id -> class_type and inputs)."""
    g = {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": checkpoint}},
        "pos": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red cube on a blue table", "clip": ["ckpt", 1]}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["ckpt", 1]}},
        "empty": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}},
    }
    if kind in ("decode_stock", "decode_engine"):
        # A decode alone. ComfyUI reruns a node only when its inputs change: the multiplier varies with the
        # seed (the latent stays zeros, which costs a decode what any latent costs).
        g = {"ckpt": g["ckpt"],
             "noise": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}}}
        g["vary"] = {"class_type": "LatentMultiply", "inputs": {"samples": ["noise", 0], "multiplier": seed / 1000.0}}
        decoder = "HipDiffusionVAEDecode" if kind == "decode_engine" else "VAEDecode"
        g["decode"] = {"class_type": decoder, "inputs": {"samples": ["vary", 0], "vae": ["ckpt", 2]}}
        g["preview"] = {"class_type": "PreviewImage", "inputs": {"images": ["decode", 0]}}
        return g
    if kind == "encode":
        g["image"] = {"class_type": "LoadImage", "inputs": {"image": "hd-check.png"}}
        g["enc"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["image", 0], "vae": ["ckpt", 2]}}
        g["enc_hd"] = {"class_type": "HipDiffusionVAEEncode", "inputs": {"pixels": ["image", 0], "vae": ["ckpt", 2]}}
        g["save"] = {"class_type": "SaveLatent", "inputs": {"samples": ["enc", 0], "filename_prefix": f"{prefix}_stock"}}
        g["save_hd"] = {"class_type": "SaveLatent", "inputs": {"samples": ["enc_hd", 0], "filename_prefix": f"{prefix}_engine"}}
        del g["pos"], g["neg"], g["empty"]
        return g
    model = ["ckpt", 0]
    if kind == "attention":
        g["patch"] = {"class_type": "HipDiffusionAttention", "inputs": {"model": model}}
        model = ["patch", 0]
    elif kind == "engine":
        g["patch"] = {"class_type": "HipDiffusionUNet", "inputs": {"model": model}}
        model = ["patch", 0]
    g["sample"] = {"class_type": "KSampler", "inputs": {
        "model": model, "positive": ["pos", 0], "negative": ["neg", 0], "latent_image": ["empty", 0], "seed": seed,
        "steps": steps, "cfg": 7.0, "sampler_name": "euler", "scheduler": "karras", "denoise": 1.0}}
    decoder = "HipDiffusionVAEDecode" if kind == "engine" else "VAEDecode"
    g["decode"] = {"class_type": decoder, "inputs": {"samples": ["sample", 0], "vae": ["ckpt", 2]}}
    g["save_latent"] = {"class_type": "SaveLatent", "inputs": {"samples": ["sample", 0], "filename_prefix": prefix}}
    g["save_image"] = {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": prefix}}
    return g


def executed_seconds(status: dict, wall: float) -> float:
    """ComfyUI's own time for the prompt, from its execution_start and execution_success messages
    (milliseconds), where it gives both; else the wall time seen here (which includes polling)."""
    stamps = {name: data.get("timestamp") for name, data in status.get("messages", [])}
    if stamps.get("execution_start") and stamps.get("execution_success"):
        return (stamps["execution_success"] - stamps["execution_start"]) / 1000.0
    return wall


def run_workflow(base: str, graph: dict) -> tuple[dict, float]:
    begin = time.perf_counter()
    prompt_id = request(f"{base}/prompt", {"prompt": graph, "client_id": "hipdiffusion-check"})["prompt_id"]
    while True:
        history = request(f"{base}/history/{prompt_id}")
        if prompt_id in history:
            entry = history[prompt_id]
            status = entry.get("status", {})
            if status.get("status_str") == "error" or not status.get("completed", True):
                raise SystemExit(f"ComfyUI failed the workflow: {json.dumps(status)[:2000]}")
            return entry["outputs"], executed_seconds(status, time.perf_counter() - begin)
        time.sleep(0.05)


def write_picture(path: Path, size: int) -> None:
    """A seeded picture for the encoders: smooth colour ramps with noise on top (a flat colour would make
    the GroupNorms divide rounding noise by a near-zero deviation)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(18)
    ramp = np.linspace(0, 1, size)
    picture = np.stack([np.add.outer(ramp, ramp) / 2, np.outer(ramp, 1 - ramp), np.add.outer(1 - ramp, ramp) / 2], -1)
    picture = np.clip(picture + rng.normal(0, 0.1, picture.shape), 0, 1)
    Image.fromarray((picture * 255).round().astype(np.uint8)).save(path)


def load_latent(path: Path):
    from safetensors.numpy import load_file

    return load_file(str(path))["latent_tensor"]


def relative_l2(a, b) -> float:
    import numpy as np

    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comfyui", required=True, type=Path)
    parser.add_argument("--python", required=True)
    parser.add_argument("--checkpoint", required=True, help="a file name in ComfyUI's models/checkpoints")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--size", type=int, default=128, help="image width and height")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each workflow")
    parser.add_argument("--decode-size", type=int, default=256, help="the decode-alone workflow's image size")
    parser.add_argument("--comfyui-args", default="", help="more arguments for ComfyUI's main.py")
    args = parser.parse_args()

    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)  # only this run's outputs are compared
    for folder in ("output", "temp", "input"):
        (out / folder).mkdir(parents=True)
    write_picture(out / "input" / "hd-check.png", args.size)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [args.python, "main.py", "--listen", "127.0.0.1", "--port", str(port), "--disable-auto-launch",
               "--output-directory", str(out / "output"), "--temp-directory", str(out / "temp"),
               "--input-directory", str(out / "input"), "--database-url", "sqlite:///:memory:"]
    if args.device == "cpu":
        command.append("--cpu")
    command += args.comfyui_args.split()
    log_path = out / "comfyui.log"
    with open(log_path, "w") as log:
        server = start(command, args.comfyui, log, f"{base}/system_stats", "ComfyUI")
        try:
            system = request(f"{base}/system_stats")
            info = request(f"{base}/object_info/HipDiffusionUNet")
            if "HipDiffusionUNet" not in info:
                raise SystemExit(f"ComfyUI did not load the hipDiffusion nodes; see {log_path}")

            timings = {}
            for kind in ["stock", "attention", "engine", "encode"]:
                _, seconds = run_workflow(base, workflow(kind, args.checkpoint, kind, args.size, args.steps))
                timings[kind] = seconds
                print(f"{kind}: {seconds:.2f} s", flush=True)
            # Timed, warm (the runs above loaded the checkpoint and built the engine's models): whole
            # images with a new seed each (the text encodings stay cached, as in a UI session), stock and
            # ours interleaved; then decodes alone at --decode-size.
            for i in range(args.repeats):
                for kind in ["stock", "attention", "engine"]:
                    _, seconds = run_workflow(base, workflow(kind, args.checkpoint, f"timed_{kind}", args.size,
                                                             args.steps, seed=2000 + i))
                    timings.setdefault(f"image_{kind}", []).append(seconds)
                for kind in ["decode_stock", "decode_engine"]:
                    _, seconds = run_workflow(base, workflow(kind, args.checkpoint, kind, args.decode_size, 1,
                                                             seed=3000 + i))
                    timings.setdefault(kind, []).append(seconds)
            for name, values in timings.items():
                if isinstance(values, list):
                    print(f"{name}: median {statistics.median(values):.3f} s of {['%.3f' % v for v in values]}",
                          flush=True)
        finally:
            stop(server)

    saved = out / "output"
    def one(pattern: str) -> Path:  # SaveLatent and SaveImage number their files: prefix_00001_.ext
        found = sorted(saved.glob(pattern))
        if len(found) != 1:
            raise SystemExit(f"expected one {pattern} in {saved}, found {len(found)}")
        return found[0]

    latent = {k: load_latent(one(f"{k}_[0-9]*_.latent")) for k in ["stock", "attention", "engine"]}
    image = {k: load_image(one(f"{k}_[0-9]*_.png")) for k in ["stock", "attention", "engine"]}
    encoded = {k: load_latent(one(f"encode_{k}_[0-9]*_.latent")) for k in ["stock", "engine"]}
    log_text = log_path.read_text()
    checks = {
        "attention latents vs stock (relative L2)": relative_l2(latent["attention"], latent["stock"]),
        "engine latents vs stock (relative L2)": relative_l2(latent["engine"], latent["stock"]),
        "engine encode vs stock (relative L2)": relative_l2(encoded["engine"], encoded["stock"]),
        "attention picture vs stock (max levels)": int(abs(image["attention"] - image["stock"]).max()),
        "engine picture vs stock (max levels)": int(abs(image["engine"] - image["stock"]).max()),
    }
    failures = []
    for name, value in checks.items():
        if "encode" in name:
            limit = ENCODE_TOLERANCE[args.device]
        else:
            limit = LATENT_TOLERANCE[args.device] if "L2" in name else PIXEL_LEVELS[args.device]
        ok = value <= limit
        print(f"{name}: {value:.3g} (limit {limit}) {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(name)
    ran, fell_back = engine_lines(log_text, RAN, "comfyui.", failures)
    medians = {k: statistics.median(v) for k, v in timings.items() if isinstance(v, list)}
    ratios = {}
    for ours, stock in [("image_engine", "image_stock"), ("image_attention", "image_stock"),
                        ("decode_engine", "decode_stock")]:
        if ours in medians and stock in medians:
            ratios[f"{ours} / {stock}"] = medians[ours] / medians[stock]
            print(f"{ours} / {stock}: {ratios[f'{ours} / {stock}']:.3f}")
    summary = {"device": args.device, "devices": system.get("devices"), "size": args.size, "steps": args.steps,
               "decode_size": args.decode_size, "seconds": timings, "medians": medians, "ratios": ratios,
               "checks": checks, "engine_ran": ran, "fallbacks": fell_back}
    finish(out, summary, failures, "ComfyUI with hipDiffusion's nodes matches ComfyUI alone")


if __name__ == "__main__":
    main()
