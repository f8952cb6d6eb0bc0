"""Real A1111 clients against a real server process: webuiapi (the A1111 client on PyPI) gets the same
pictures as the CLI for the same seed and settings (a batch's within a level of the lone pictures'), and schemathesis holds the server to its OpenAPI
document (no 5xx, every answer documented and of its documented shape, bad input refused)."""
import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import CLI, ROOT, TINY

webuiapi = pytest.importorskip("webuiapi")


def cli_picture(tmp_path: Path, *args: str) -> np.ndarray:
    out = tmp_path / "cli.png"
    subprocess.run([str(CLI), "generate", "--model", str(TINY), "--output", str(out), *args], check=True,
                   capture_output=True)
    return np.asarray(Image.open(out).convert("RGB"))


def within_a_level(got: Image.Image, expected: np.ndarray) -> bool:
    """A picture of a batch against the same seed's picture made alone: the server runs a request's two
    pictures as one batch (a UNet batch of 4 with the unconditioned halves), the CLI each alone (2), and the
    CPU's BLAS may add in another order for another size of product. On this project's 2-core machine
    (2026-11-27, OpenBLAS 0.3.21's AVX-512 kernels) that moved 5 of the second picture's 12288 values by one
    level; a wrong seed or setting changes most of them by many."""
    difference = np.abs(np.asarray(got.convert("RGB")).astype(int) - expected.astype(int))
    return difference.max() <= 1 and np.count_nonzero(difference) <= difference.size // 100


def test_webuiapi_txt2img_gets_the_clis_picture(start_server, tmp_path):
    server = start_server("--model", str(TINY))
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler a", steps=3)
    result = api.txt2img(prompt="a red square", negative_prompt="blurry", seed=7, width=64, height=64,
                         cfg_scale=7.5, batch_size=2)
    assert len(result.images) == 2
    expected = cli_picture(tmp_path, "--prompt", "a red square", "--negative-prompt", "blurry", "--seed", "7",
                           "--steps", "3", "--width", "64", "--height", "64", "--sampler", "euler_a",
                           "--cfg-scale", "7.5")
    assert within_a_level(result.images[0], expected)
    assert result.info["all_seeds"] == [7, 8]  # A1111's seeds: seed + i
    second = cli_picture(tmp_path, "--prompt", "a red square", "--negative-prompt", "blurry", "--seed", "8",
                         "--steps", "3", "--width", "64", "--height", "64", "--sampler", "euler_a", "--cfg-scale", "7.5")
    assert within_a_level(result.images[1], second)
    assert not within_a_level(result.images[1], expected)  # and not the first seed's picture
    # The PNG carries A1111's parameters text, as the CLI's does.
    assert "Seed: 8" in result.images[1].info["parameters"]
    assert result.info["infotexts"][0].startswith("a red square\nNegative prompt: blurry\nSteps: 3, Sampler: Euler a")
    assert result.info["sd_model_name"] == "tiny_sd1"


def test_webuiapi_img2img_gets_the_clis_picture(start_server, tmp_path):
    server = start_server("--model", str(TINY))
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler a", steps=4)
    init = ROOT / "tests" / "fixtures" / "models" / "img2img_init.png"
    image = Image.open(init).convert("RGB")
    result = api.img2img(images=[image], prompt="a blue circle", seed=3, width=image.width, height=image.height,
                         denoising_strength=0.5, cfg_scale=7.5)
    expected = cli_picture(tmp_path, "--prompt", "a blue circle", "--seed", "3", "--steps", "4", "--sampler", "euler_a",
                           "--cfg-scale", "7.5", "--init-image", str(init), "--strength", "0.5")
    assert np.array_equal(np.asarray(result.image.convert("RGB")), expected)
    assert "Denoising strength: 0.5" in result.image.info["parameters"]


def test_webuiapi_lists_models_samplers_and_switches_models(start_server, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    for name in ("tiny_sd1", "tiny_sd2"):
        (models / name).symlink_to(ROOT / "tests" / "fixtures" / "models" / name)
    server = start_server("--models-dir", str(models))
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port, steps=2)
    assert api.util_get_model_names() == ["tiny_sd1", "tiny_sd2"]
    assert api.util_get_current_model() == "tiny_sd1"
    assert {"Euler", "Euler a", "DPM++ 2M", "DDIM"} <= set(api.util_get_sampler_names())
    api.util_set_model("tiny_sd2")
    assert api.util_get_current_model() == "tiny_sd2"
    result = api.txt2img(prompt="x", seed=1, width=64, height=64)
    assert result.info["sd_model_name"] == "tiny_sd2"
    # A model for one request only, through override_settings.
    result = api.txt2img(prompt="x", seed=1, width=64, height=64,
                         override_settings={"sd_model_checkpoint": "tiny_sd1"})
    assert result.info["sd_model_name"] == "tiny_sd1"
    assert api.util_get_current_model() == "tiny_sd2"
    progress = api.get_progress()
    assert progress["state"]["job_count"] == 0 and progress["progress"] == 0
    # Fields the engine cannot honour: a 422 naming them, never a silently different picture.
    with pytest.raises(RuntimeError, match="422.*restore_faces"):
        api.txt2img(prompt="x", width=64, height=64, restore_faces=True)
    with pytest.raises(RuntimeError, match="422.*no model named"):
        api.txt2img(prompt="x", width=64, height=64, override_settings={"sd_model_checkpoint": "/etc/passwd"})


def test_a_prompts_lora_tag_gets_the_clis_picture_with_that_lora(start_server, tmp_path):
    loras = tmp_path / "Lora"
    loras.mkdir()
    (loras / "detail.safetensors").symlink_to(ROOT / "tests" / "fixtures" / "models" / "tiny_sd1_lora_kohya.safetensors")
    (loras / "xl.safetensors").symlink_to(ROOT / "tests" / "fixtures" / "models" / "tiny_sdxl_lora_kohya.safetensors")
    server = start_server("--model", str(TINY), "--lora-dir", str(loras))
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler a", steps=3)
    assert requests.get(f"{server.url}/sdapi/v1/loras").json() == [
        {"name": "detail", "alias": "detail", "path": "detail.safetensors", "metadata": {}},
        {"name": "xl", "alias": "xl", "path": "xl.safetensors", "metadata": {}}]
    result = api.txt2img(prompt="a red square <lora:detail:0.7>", seed=7, width=64, height=64, cfg_scale=7.5)
    with_lora = cli_picture(tmp_path, "--prompt", "a red square", "--seed", "7", "--steps", "3", "--width", "64",
                            "--height", "64", "--sampler", "euler_a", "--cfg-scale", "7.5",
                            "--lora", f"{loras / 'detail.safetensors'}:0.7")
    assert np.array_equal(np.asarray(result.image.convert("RGB")), with_lora)
    plain = cli_picture(tmp_path, "--prompt", "a red square", "--seed", "7", "--steps", "3", "--width", "64",
                        "--height", "64", "--sampler", "euler_a", "--cfg-scale", "7.5")
    assert not np.array_equal(with_lora, plain)  # the LoRA changes the picture
    # The tag comes back in the infotext (after the prompt), as A1111 writes it, for a UI to read back.
    assert result.image.info["parameters"].startswith("a red square  <lora:detail:0.7>\nSteps: 3")
    # The text encoder's and the UNet's scales apart, as A1111 takes them, and as the CLI's FILE:TE:UNET.
    apart = api.txt2img(prompt="a red square <lora:detail:0.7:unet=0.2>", seed=7, width=64, height=64, cfg_scale=7.5)
    apart_cli = cli_picture(tmp_path, "--prompt", "a red square", "--seed", "7", "--steps", "3", "--width", "64",
                            "--height", "64", "--sampler", "euler_a", "--cfg-scale", "7.5",
                            "--lora", f"{loras / 'detail.safetensors'}:0.7:0.2")
    assert np.array_equal(np.asarray(apart.image.convert("RGB")), apart_cli)
    assert not np.array_equal(apart_cli, with_lora)
    assert apart.image.info["parameters"].startswith("a red square  <lora:detail:0.7:0.2>\nSteps: 3")
    # An SDXL LoRA on this SD1.x model: refused before anything runs, the loaded model kept.
    with pytest.raises(RuntimeError, match="422.*LoRA xl does not fit model"):
        api.txt2img(prompt="a red square <lora:xl:1>", width=64, height=64)
    with pytest.raises(RuntimeError, match="422.*no LoRA named .*style.* \\(this server has: detail, xl\\)"):
        api.txt2img(prompt="<lora:style:1> x", width=64, height=64)
    with pytest.raises(RuntimeError, match="422.*hypernet"):
        api.txt2img(prompt="<hypernet:anime:1> x", width=64, height=64)


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(start_server, tmp_path):
    # Limits small enough that every generation the schema allows is quick on a CPU.
    server = start_server("--model", str(TINY), "--max-steps", "2", "--max-pixels", "4096", "--max-images", "2")
    schemathesis = Path(sys.executable).parent / "schemathesis"
    # positive_data_acceptance is left out: a schema cannot say width x height <= the pixel limit, nor
    # that an init image must be a PNG of the request's size, so schema-valid requests are refused there.
    run = subprocess.run([str(schemathesis), "run", f"{server.url}/openapi.json", "--checks",
                          "not_a_server_error,status_code_conformance,content_type_conformance,"
                          "response_schema_conformance,negative_data_rejection",
                          "--phases", "examples,fuzzing", "--max-examples", "40", "--seed", "1", "-w", "2"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)  # its cache stays there
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert server.process.poll() is None, server.log()


def test_every_route_answers_json_errors_as_a1111_clients_read_them(start_server):
    server = start_server("--model", str(TINY), "--max-body-mb", "1")
    too_large = requests.post(f"{server.url}/sdapi/v1/txt2img", data=b"x" * (2 << 20))
    assert too_large.status_code == 413 and "larger than" in too_large.json()["detail"]
    broken = requests.post(f"{server.url}/sdapi/v1/txt2img", data=b'{"prompt": ')
    assert broken.status_code == 422 and "not valid JSON" in broken.json()["detail"]
    not_png = requests.post(f"{server.url}/sdapi/v1/img2img", json={
        "init_images": [base64.b64encode(b"GIF89a....").decode()], "width": 64, "height": 64})
    assert not_png.status_code == 422 and "not a PNG" in not_png.json()["detail"]
    garbage = requests.post(f"{server.url}/sdapi/v1/img2img", json={"init_images": ["%%%"], "width": 64, "height": 64})
    assert garbage.status_code == 422 and "not valid base64" in garbage.json()["detail"]
    absurd = requests.post(f"{server.url}/sdapi/v1/txt2img", json={"cfg_scale": 1e308, "width": 64, "height": 64})
    assert absurd.status_code == 422 and "cfg_scale" in absurd.json()["detail"]
    assert requests.get(f"{server.url}/sdapi/v1/nothing").status_code == 404
    assert requests.get(f"{server.url}/../../etc/passwd").status_code in (400, 404)
    png = io.BytesIO()
    Image.new("RGB", (64, 64), (10, 20, 30)).save(png, format="PNG")
    ok = requests.post(f"{server.url}/sdapi/v1/img2img", json={
        "init_images": ["data:image/png;base64," + base64.b64encode(png.getvalue()).decode()],
        "width": 64, "height": 64, "steps": 2, "denoising_strength": 0.5})
    assert ok.status_code == 200, ok.text
    quiet = requests.post(f"{server.url}/sdapi/v1/txt2img", json={
        "prompt": "a", "width": 32, "height": 32, "steps": 2, "seed": 5, "send_images": False})
    assert quiet.status_code == 200 and quiet.json()["images"] == [], quiet.text
    assert json.loads(quiet.json()["info"])["all_seeds"] == [5]
    assert server.process.poll() is None, server.log()


def test_a_refiner_request_gets_the_clis_refined_picture(start_server, tmp_path):
    # SDXL's base and refiner from the server's model folder, named per request as A1111's clients send
    # them (refiner_checkpoint, refiner_switch_at); the picture is the CLI's --refiner --high-noise-frac one.
    models = tmp_path / "models"
    models.mkdir()
    fixtures = ROOT / "tests" / "fixtures" / "models"
    for name in ("tiny_sdxl_pipeline", "tiny_sdxl_refiner"):
        (models / name).symlink_to(fixtures / name)
    server = start_server("--models-dir", str(models))
    body = {"prompt": "a red square", "seed": 5, "steps": 4, "width": 64, "height": 64, "cfg_scale": 7.5,
            "sampler_name": "Euler a", "refiner_checkpoint": "tiny_sdxl_refiner", "refiner_switch_at": 0.5}
    answer = requests.post(f"{server.url}/sdapi/v1/txt2img", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    image = Image.open(io.BytesIO(base64.b64decode(answer.json()["images"][0])))
    out = tmp_path / "cli.png"
    subprocess.run([str(CLI), "generate", "--model", str(fixtures / "tiny_sdxl_pipeline"), "--refiner",
                    str(fixtures / "tiny_sdxl_refiner"), "--high-noise-frac", "0.5", "--prompt", "a red square",
                    "--seed", "5", "--steps", "4", "--width", "64", "--height", "64", "--sampler", "euler_a",
                    "--cfg-scale", "7.5", "--output", str(out)], check=True, capture_output=True)
    assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(Image.open(out).convert("RGB")))
    assert "Refiner: tiny_sdxl_refiner, Refiner switch at: 0.5" in image.info["parameters"]
    # A refiner needs its switch, and a refiner of a model that is not SDXL's base fails that request alone.
    del body["refiner_switch_at"]
    refused = requests.post(f"{server.url}/sdapi/v1/txt2img", json=body, timeout=60)
    assert refused.status_code == 422 and "refiner_switch_at" in refused.json()["detail"], refused.text
    swapped = dict(body, refiner_switch_at=0.5, override_settings={"sd_model_checkpoint": "tiny_sdxl_refiner"},
                   refiner_checkpoint="tiny_sdxl_pipeline")
    refused = requests.post(f"{server.url}/sdapi/v1/txt2img", json=swapped, timeout=60)
    assert refused.status_code == 422 and "the base model is an SDXL refiner" in refused.json()["detail"], refused.text
