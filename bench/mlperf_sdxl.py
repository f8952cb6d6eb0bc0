#!/usr/bin/env python3
"""An MLPerf-style harness: MLCommons' LoadGen (`mlcommons-loadgen` on PyPI) drives text-to-image
generation as MLPerf Inference's stable-diffusion-xl benchmark does (1024x1024, 20 Euler steps, guidance
8), in its Offline scenario (every query at once: throughput) or its Server scenario (queries arriving
as a Poisson process at --target-qps, each answered within a latency bound at the 99th percentile).

Two systems under test, one harness:
- `--backend hipdiffusion`: the engine through its C API (libhipdiffusion.so, loaded with ctypes), one
  hd_generate per query on --concurrency threads, so that queries share UNet batches (the engine's
  batching across requests).
- `--backend diffusers`: diffusers' StableDiffusionXLPipeline on one thread, --batch queries per call.

The settings are MLPerf's reference ones (mlcommons/inference, text_to_image/backend_pytorch.py: 20
steps, guidance 8, EulerDiscreteScheduler, its negative prompt; loadgen/mlperf.conf: a 20 s bound at the
99th percentile in the Server scenario). What this is not: an MLPerf submission. MLPerf's dataset is 5000
COCO 2014 captions, its starting latents one fixed tensor, its accuracy FID and CLIP score; this harness
draws its prompts from a fixed list of caption-like sentences (the speed does not depend on the words)
and seeds each sample's noise with its index, and with random weights (the default on a GPU: SDXL base's
shapes, as `hipdiffusion bench --arch sdxl` writes them) no accuracy can be measured. The run lengths
(--min-duration, --min-queries) are set here; MLPerf's are 600 s and, Offline, 5000 queries, and LoadGen
judges a Server run VALID only with enough queries for its early-stopping estimate of the percentile.
`--save-images DIR` keeps the first pictures (PNG) so that a run's pictures can be checked against the
CLI's.

    python3 bench/mlperf_sdxl.py --backend hipdiffusion --lib build/cuda/libhipdiffusion.so \\
        --model /tmp/hipdiffusion-random-sdxl --device cuda:0 --scenario Offline --json-out offline.json
"""
import argparse
import ctypes
import json
import queue
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import mlperf_loadgen as lg

SUBJECTS = ["a red bus", "two cats", "an old man", "a bowl of fruit", "a small boat", "a group of children",
            "a brown dog", "a wooden bench", "a tall giraffe", "a plate of pasta", "a yellow kite", "a train"]
PLACES = ["on a city street", "in a green park", "next to a lake", "on a kitchen table", "under a cloudy sky",
          "in front of a brick wall", "on a snowy hill", "at the beach"]


def prompts(count):
    """`count` caption-like prompts, the same on every run (MLPerf's COCO captions are of this kind)."""
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {PLACES[(i // len(SUBJECTS)) % len(PLACES)]}" for i in range(count)]


# ---- hipDiffusion through its C API (include/hipdiffusion/hipdiffusion.h) ----

class EngineOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("model_paths", ctypes.POINTER(ctypes.c_char_p)),
                ("model_count", ctypes.c_size_t), ("models_dir", ctypes.c_char_p), ("device", ctypes.c_char_p),
                ("dtype", ctypes.c_char_p), ("max_queue", ctypes.c_uint32), ("max_batch_rows", ctypes.c_uint32),
                ("batch_across_generations", ctypes.c_int32)]


PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


class GenerationParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("model", ctypes.c_char_p), ("prompt", ctypes.c_char_p),
                ("negative_prompt", ctypes.c_char_p), ("steps", ctypes.c_int32), ("cfg_scale", ctypes.c_float),
                ("sampler", ctypes.c_char_p), ("schedule", ctypes.c_char_p), ("seed", ctypes.c_uint64),
                ("width", ctypes.c_int32), ("height", ctypes.c_int32), ("batch", ctypes.c_int32),
                ("init_image", ctypes.POINTER(ctypes.c_uint8)), ("strength", ctypes.c_float),
                ("progress", PROGRESS), ("progress_user_data", ctypes.c_void_p),
                ("refiner", ctypes.c_char_p), ("refiner_switch_at", ctypes.c_double)]  # version 2


class HipDiffusion:
    """The engine, one generation per call; calls from several threads share UNet batches."""

    def __init__(self, lib, model, device, max_batch_rows):
        self.lib = ctypes.CDLL(lib)
        self.lib.hd_last_error.restype = ctypes.c_char_p
        self.lib.hd_generation_params_init_sized.argtypes = [ctypes.POINTER(GenerationParams), ctypes.c_size_t]
        # The fields of version 2 (the refiner) exist in this struct: the library must know them.
        self.lib.hd_api_version.restype = ctypes.c_int32
        if self.lib.hd_api_version() < 2:
            raise SystemExit(f"{lib} speaks the C API's version {self.lib.hd_api_version()}; this harness needs 2")
        options = EngineOptions()
        self.lib.hd_engine_options_init(ctypes.byref(options))
        self.paths = (ctypes.c_char_p * 1)(model.encode())
        options.model_paths, options.model_count = self.paths, 1
        options.device = device.encode()
        options.max_batch_rows = max_batch_rows
        options.max_queue = 4096  # LoadGen's Offline scenario queues every query at once (--concurrency run)
        self.engine = ctypes.c_void_p()
        self.check(self.lib.hd_engine_create(ctypes.byref(options), ctypes.byref(self.engine)), "hd_engine_create")

    def check(self, status, call):
        if status != 0:
            raise RuntimeError(f"{call}: {self.lib.hd_last_error().decode()}")

    def generate(self, prompt, negative, seed, size, steps, guidance):
        """One picture: its RGB bytes (height x width x 3) and its width and height."""
        p = GenerationParams()
        self.lib.hd_generation_params_init_sized(ctypes.byref(p), ctypes.sizeof(p))
        p.prompt, p.negative_prompt = prompt.encode(), negative.encode()
        p.steps, p.cfg_scale, p.seed, p.width, p.height = steps, guidance, seed, size, size
        result = ctypes.c_void_p()
        self.check(self.lib.hd_generate(self.engine, ctypes.byref(p), ctypes.byref(result)), "hd_generate")
        try:
            width, height, rgb = ctypes.c_int32(), ctypes.c_int32(), ctypes.POINTER(ctypes.c_uint8)()
            self.check(self.lib.hd_result_image(result, 0, ctypes.byref(width), ctypes.byref(height), ctypes.byref(rgb)),
                       "hd_result_image")
            return ctypes.string_at(rgb, width.value * height.value * 3), width.value, height.value
        finally:
            self.lib.hd_result_free(result)

    def close(self):
        self.lib.hd_engine_free(self.engine)


# ---- diffusers ----

class Diffusers:
    """StableDiffusionXLPipeline: from a diffusers folder, or SDXL base's configs with random weights."""

    def __init__(self, model, device):
        import torch
        from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        if model:
            pipe = StableDiffusionXLPipeline.from_pretrained(model, torch_dtype=dtype)
        else:  # the comparison's random SDXL base (bench/compare_diffusers.py), tokenizers from the engine's folder
            sys.path.insert(0, str(Path(__file__).parent))
            from compare_diffusers import sdxl_pipeline
            pipe = sdxl_pipeline(f"{tempfile.gettempdir()}/hipdiffusion-random-sdxl")
        # MLPerf's scheduler: Euler, as the engine's default (discrete timesteps, "leading" spacing).
        pipe.scheduler = EulerDiscreteScheduler.from_config(pipe.scheduler.config)
        pipe.set_progress_bar_config(disable=True)
        self.pipe, self.device, self.torch = pipe.to(device), device, torch

    def generate_batch(self, prompts_, negative, seeds, size, steps, guidance):
        generators = [self.torch.Generator("cpu").manual_seed(s) for s in seeds]
        with self.torch.inference_mode():
            images = self.pipe(prompt=prompts_, negative_prompt=[negative] * len(prompts_), num_inference_steps=steps,
                               guidance_scale=guidance, height=size, width=size, generator=generators,
                               output_type="np").images
        out = []
        for image in images:
            rgb = (image.clip(0, 1) * 255).round().astype("uint8")
            out.append((rgb.tobytes(), rgb.shape[1], rgb.shape[0]))
        return out


# ---- the system under test ----

class SystemUnderTest:
    """Takes LoadGen's queries into one queue; `workers` threads answer them (each answer reported to
    LoadGen as it completes). Pictures of the first --save-images queries are kept as PNG files."""

    def __init__(self, args, sample_prompts):
        self.args, self.prompts = args, sample_prompts
        self.queue, self.errors, self.done = queue.Queue(), [], 0
        self.lock = threading.Lock()
        if args.backend == "hipdiffusion":
            self.backend = HipDiffusion(args.lib, args.model, args.device, args.max_batch_rows)
            workers, self.batch = args.concurrency, 1
        else:
            self.backend = Diffusers(args.model, args.device)
            workers, self.batch = 1, args.batch
        self.threads = [threading.Thread(target=self.work, daemon=True) for _ in range(workers)]
        for t in self.threads:
            t.start()

    def issue(self, samples):
        for s in samples:
            self.queue.put(s)

    def work(self):
        while True:
            taken = [self.queue.get()]
            if taken[0] is None:
                return
            while len(taken) < self.batch:
                try:
                    extra = self.queue.get_nowait()
                except queue.Empty:
                    break
                if extra is None:
                    self.queue.put(None)
                    break
                taken.append(extra)
            try:
                pictures = self.generate([s.index for s in taken])
            except Exception as e:  # noqa: BLE001 (reported after the run: LoadGen must still get answers)
                with self.lock:
                    self.errors.append(f"{type(e).__name__}: {e}")
                pictures = [(b"", 0, 0)] * len(taken)
            for s, (rgb, width, height) in zip(taken, pictures):
                self.keep(s.index, rgb, width, height)
                # The answer carries no data: performance mode only (accuracy needs real weights).
                lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0)])
            with self.lock:
                self.done += len(taken)

    def warm_up(self):
        """Outside LoadGen's clock: the engine tunes its kernels and captures a graph per batch shape on
        first use, so a full house of generations runs first (twice: the second finds what the first
        left), as the workers will run them; diffusers runs one call of its batch."""
        if self.args.backend != "hipdiffusion":
            self.generate(list(range(min(self.batch, self.args.samples))))
            return
        for _ in range(2):
            threads = [threading.Thread(target=self.generate, args=([i % self.args.samples],))
                       for i in range(len(self.threads))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def generate(self, indices):
        a = self.args
        if a.backend == "hipdiffusion":
            return [self.backend.generate(self.prompts[i], a.negative_prompt, i, a.size, a.steps, a.guidance)
                    for i in indices]
        return self.backend.generate_batch([self.prompts[i] for i in indices], a.negative_prompt, list(indices),
                                           a.size, a.steps, a.guidance)

    def keep(self, index, rgb, width, height):
        size = self.args.size
        if rgb and ((width, height) != (size, size) or len(rgb) != width * height * 3):
            with self.lock:
                self.errors.append(f"sample {index}: a {width}x{height} picture for a {size}x{size} query")
        if not self.args.save_images or index >= self.args.save_count or not rgb:
            return
        from PIL import Image
        path = Path(self.args.save_images) / f"{index:05d}.png"
        if not path.exists():
            Image.frombytes("RGB", (width, height), rgb).save(path)

    def close(self):
        for _ in self.threads:
            self.queue.put(None)
        for t in self.threads:
            t.join()
        if self.args.backend == "hipdiffusion":
            self.backend.close()


# ---- LoadGen's settings and summary ----

def settings_of(args):
    s = lg.TestSettings()
    s.scenario = lg.TestScenario.Offline if args.scenario == "Offline" else lg.TestScenario.Server
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = int(args.min_duration * 1000)
    s.min_query_count = args.min_queries
    if args.scenario == "Offline":
        s.offline_expected_qps = args.expected_qps
    else:
        s.server_target_qps = args.target_qps
        s.server_target_latency_ns = int(args.latency_s * 1e9)
    return s


# LoadGen's own words (loadgen/results.cc); the Server scenario's headline is the completed rate (LoadGen
# 4.1 and later), and a run is VALID only where each of the "satisfied" lines says Yes.
SUMMARY_KEYS = {"Samples per second": "samples_per_second",
                "Completed samples per second": "completed_samples_per_second",
                "Scheduled samples per second": "scheduled_samples_per_second",
                "Result is": "result", "Performance constraints satisfied": "latency_bound_met",
                "Min duration satisfied": "min_duration_met", "Min queries satisfied": "min_queries_met",
                "Early stopping satisfied": "early_stopping_met",
                "Min latency (ns)": "min_latency_ns", "Mean latency (ns)": "mean_latency_ns",
                "50.00 percentile latency (ns)": "p50_latency_ns", "90.00 percentile latency (ns)": "p90_latency_ns",
                "99.00 percentile latency (ns)": "p99_latency_ns", "Max latency (ns)": "max_latency_ns"}


def read_summary(path):
    """The figures of LoadGen's mlperf_log_summary.txt this harness reports."""
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\s*([^:]+?)\s*:\s*(\S+)\s*$", line)
        if m and m.group(1) in SUMMARY_KEYS:
            value = m.group(2)
            try:
                out[SUMMARY_KEYS[m.group(1)]] = float(value)
            except ValueError:  # VALID / INVALID, Yes / No
                out[SUMMARY_KEYS[m.group(1)]] = value
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["hipdiffusion", "diffusers"], required=True)
    parser.add_argument("--scenario", choices=["Offline", "Server"], default="Offline")
    parser.add_argument("--model", default="", help="a model folder or file (hipdiffusion: required; diffusers: a "
                        "diffusers folder, or none for SDXL base's configs with random weights)")
    parser.add_argument("--lib", default="build/cuda/libhipdiffusion.so", help="hipdiffusion: the C library")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--guidance", type=float, default=8.0)
    parser.add_argument("--negative-prompt", default="normal quality, low quality, worst quality, low res, blurry, nsfw, "
                        "nude", help="MLPerf's reference (text_to_image/backend_pytorch.py)")
    parser.add_argument("--samples", type=int, default=64, help="prompts in the sample set (LoadGen's QSL)")
    parser.add_argument("--min-duration", type=float, default=60.0, help="seconds")
    parser.add_argument("--min-queries", type=int, default=64)
    parser.add_argument("--expected-qps", type=float, default=1.0, help="Offline: LoadGen's expected samples/s")
    parser.add_argument("--target-qps", type=float, default=1.0, help="Server: queries/s arriving")
    parser.add_argument("--latency-s", type=float, default=20.0, help="Server: the p99 latency bound")
    parser.add_argument("--concurrency", type=int, default=16, help="hipdiffusion: generations in flight")
    parser.add_argument("--max-batch-rows", type=int, default=16, help="hipdiffusion: UNet rows a step may hold")
    parser.add_argument("--batch", type=int, default=1, help="diffusers: queries per pipeline call")
    parser.add_argument("--save-images", default="", help="a folder for the first --save-count pictures")
    parser.add_argument("--save-count", type=int, default=4)
    parser.add_argument("--log-dir", default="", help="LoadGen's logs (default: a temporary folder)")
    parser.add_argument("--json-out", default="")
    args = parser.parse_args()
    if args.backend == "hipdiffusion" and not args.model:
        parser.error("--backend hipdiffusion needs --model (e.g. the folder `hipdiffusion bench --arch sdxl` writes)")
    if args.save_images:
        Path(args.save_images).mkdir(parents=True, exist_ok=True)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="mlperf-")
    Path(log_dir).mkdir(parents=True, exist_ok=True)

    sample_prompts = prompts(args.samples)
    start = time.perf_counter()
    sut_impl = SystemUnderTest(args, sample_prompts)
    sut_impl.warm_up()
    setup_s = time.perf_counter() - start
    sut = lg.ConstructSUT(sut_impl.issue, lambda: None)
    qsl = lg.ConstructQSL(args.samples, args.samples, lambda indices: None, lambda indices: None)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = log_dir
    log_settings.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut, qsl, settings_of(args), log_settings)
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    sut_impl.close()
    if sut_impl.errors:
        raise SystemExit("generations failed:\n" + "\n".join(sut_impl.errors[:10]))

    summary = read_summary(Path(log_dir) / "mlperf_log_summary.txt")
    report = {"backend": args.backend, "scenario": args.scenario, "model": args.model or "random SDXL base weights",
              "device": args.device, "size": args.size, "steps": args.steps, "guidance": args.guidance,
              "samples": args.samples, "answered": sut_impl.done, "setup_s": setup_s, "log_dir": log_dir,
              "settings": {"min_duration_s": args.min_duration, "min_queries": args.min_queries,
                           "expected_qps": args.expected_qps, "target_qps": args.target_qps,
                           "latency_s": args.latency_s, "concurrency": args.concurrency, "batch": args.batch},
              **summary}
    print(json.dumps(report, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
