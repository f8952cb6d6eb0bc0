"""The VAE nodes' work on a stand-in for ComfyUI's VAE (CI has no ComfyUI): the tiny SD1.x pipeline's VAE
under its single-file (LDM) names in a module named AutoencoderKL, as ComfyUI's holds it, against
diffusers' AutoencoderKL on the same weights."""

import importlib
import sys
import types

import pytest
import torch

from hipdiffusion import fallback_report, reset_fallback_report

from ldm_stand_ins import FIXTURES, diffusers_or_skip, ldm_module


def ldm_vae(groups: int) -> torch.nn.Module:
    return ldm_module("AutoencoderKL", "first_stage_model.", ["decoder", "norm_out"], groups)


class Vae:
    """comfy.sd.VAE's part the nodes use."""

    def __init__(self, groups: int):
        self.first_stage_model = ldm_vae(groups)
        self.latent_dim = 2
        self.vae_dtype = torch.float32
        self.output_device = torch.device("cpu")
        self.patcher = object()
        self.fell_back = 0

    def process_input(self, image):
        return image * 2.0 - 1.0

    def process_output(self, image):
        return torch.clamp((image + 1.0) / 2.0, min=0.0, max=1.0)

    def memory_used_decode(self, shape, dtype):
        return 1

    def memory_used_encode(self, shape, dtype):
        return 1

    def vae_encode_crop_pixels(self, pixels):
        return pixels[:, : pixels.shape[1] // 8 * 8, : pixels.shape[2] // 8 * 8]

    def decode(self, latents):
        self.fell_back += 1
        return "comfy's decode"


@pytest.fixture
def setup(package):
    diffusers = diffusers_or_skip()
    reset_fallback_report()
    loaded = []
    comfy = types.ModuleType("comfy")
    comfy.model_management = types.ModuleType("comfy.model_management")
    comfy.model_management.load_models_gpu = lambda models, **kwargs: loaded.append(models)
    saved = {k: sys.modules.get(k) for k in ("comfy", "comfy.model_management")}
    sys.modules.update({"comfy": comfy, "comfy.model_management": comfy.model_management})
    reference = diffusers.AutoencoderKL.from_pretrained(str(FIXTURES / "tiny_sd1" / "vae"), torch_dtype=torch.float32)
    vae = Vae(reference.config.norm_num_groups)
    yield importlib.import_module(package.__name__ + ".vae"), reference.eval(), vae, loaded
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v


def test_decode_gives_comfyuis_picture(setup):
    vae_module, reference, vae, loaded = setup
    latents = torch.randn(2, 4, 6, 10, generator=torch.Generator().manual_seed(9))
    images = vae_module.decode(vae, latents)
    with torch.no_grad():
        expected = torch.clamp((reference.decode(latents).sample + 1) / 2, 0, 1).permute(0, 2, 3, 1)
    assert images.shape == (2, 12, 20, 3)  # the tiny VAE upsamples twice and images.dtype == torch.float32
    torch.testing.assert_close(images, expected, rtol=1e-4, atol=1e-4)
    assert loaded == [[vae.patcher]] and vae.fell_back == 0 and fallback_report() == []


def test_encode_gives_the_distributions_mean(setup):
    vae_module, reference, vae, _ = setup
    pixels = torch.rand(1, 50, 66, 4, generator=torch.Generator().manual_seed(10))  # RGBA, not a multiple of 8
    latents = vae_module.encode(vae, pixels)
    cropped = pixels[:, :48, :64, :3]
    with torch.no_grad():
        expected = reference.encode(cropped.permute(0, 3, 1, 2) * 2 - 1).latent_dist.mean
    assert latents.shape == (1, 4, 24, 32)
    torch.testing.assert_close(latents, expected, rtol=1e-4, atol=1e-4)


def test_a_vae_it_does_not_run_goes_to_comfyuis_decode(setup):
    vae_module, _, vae, _ = setup
    vae.latent_dim = 3  # a video VAE
    assert vae_module.decode(vae, torch.zeros(1, 4, 8, 8)) == "comfy's decode"
    assert vae.fell_back == 1
    assert fallback_report() == [{"op": "comfyui.vae", "reason": "a AutoencoderKL (the engine runs Stable Diffusion's "
                                  "2-D AutoencoderKL)", "count": 1}]
