"""bench/mlperf_sdxl.py, the MLPerf-style LoadGen harness, on the CPU with the tiny SDXL fixture: LoadGen's
Offline scenario runs to a valid result and its Server scenario to its latency bound (a run this short
fails LoadGen's early-stopping estimate, so it is not judged VALID), every query answered; the engine's
first picture is the CLI's for the same prompt and seed (the harness's prompts, seeds and settings reach
the engine), and diffusers' pipeline behind the same harness draws the same picture."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("mlperf_loadgen")

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "bench" / "mlperf_sdxl.py"
LIB = ROOT / "build" / "cpu" / "libhipdiffusion.so"
CLI = ROOT / "build" / "cpu" / "hipdiffusion"
TINY_SDXL = ROOT / "tests" / "fixtures" / "models" / "tiny_sdxl_pipeline"
NEGATIVE = "blurry"


def run(tmp_path, name, *args):
    if not LIB.exists():
        pytest.fail(f"{LIB} is missing: build the cpu preset first (the README's test command does)")
    out = tmp_path / name
    command = [sys.executable, str(HARNESS), "--model", str(TINY_SDXL), "--device", "cpu", "--size", "64",
               "--steps", "3", "--negative-prompt", NEGATIVE, "--samples", "6", "--min-duration", "0",
               "--min-queries", "6", "--save-images", str(out), "--save-count", "2", "--log-dir", str(out / "log"),
               "--json-out", str(out / "report.json"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "report.json").read_text()), out


def pixels(path):
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def test_offline_answers_every_query_with_the_clis_picture(tmp_path):
    report, out = run(tmp_path, "offline", "--backend", "hipdiffusion", "--lib", str(LIB), "--scenario", "Offline",
                      "--expected-qps", "100", "--concurrency", "3")
    assert report["result"] == "VALID", report
    assert report["answered"] >= 6 and report["samples_per_second"] > 0
    sys.path.insert(0, str(ROOT / "bench"))
    from mlperf_sdxl import prompts
    cli = tmp_path / "cli.png"
    subprocess.run([str(CLI), "generate", "--model", str(TINY_SDXL), "--prompt", prompts(1)[0], "--negative-prompt",
                    NEGATIVE, "--seed", "0", "--steps", "3", "--width", "64", "--height", "64", "--cfg-scale", "8",
                    "--output", str(cli)], check=True, capture_output=True)
    # Batched with the other queries, the numbers may move by the summation order: one level at most.
    assert np.abs(pixels(out / "00000.png") - pixels(cli)).max() <= 1
    assert (out / "00001.png").exists()


def test_server_answers_every_query_within_the_bound(tmp_path):
    report, _ = run(tmp_path, "server", "--backend", "hipdiffusion", "--lib", str(LIB), "--scenario", "Server",
                    "--target-qps", "4", "--latency-s", "60", "--concurrency", "3")
    assert report["answered"] >= 6
    assert 0 < report["p99_latency_ns"] <= 60e9
    assert report["completed_samples_per_second"] > 0


def test_diffusers_behind_the_same_harness_draws_the_same_picture(tmp_path):
    pytest.importorskip("diffusers")
    ours, ours_out = run(tmp_path, "ours", "--backend", "hipdiffusion", "--lib", str(LIB), "--expected-qps", "100",
                         "--concurrency", "1")
    theirs, theirs_out = run(tmp_path, "theirs", "--backend", "diffusers", "--expected-qps", "100", "--batch", "2")
    assert theirs["result"] == "VALID" and theirs["answered"] >= 6
    # The engine matches diffusers on the tiny SDXL pipeline within f32 rounding (tests/pipeline).
    assert np.abs(pixels(ours_out / "00000.png") - pixels(theirs_out / "00000.png")).max() <= 1
