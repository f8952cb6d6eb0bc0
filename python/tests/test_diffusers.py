"""hipdiffusion.diffusers.optimize on the tiny SD1.x-like and SDXL-like pipelines of the test fixtures
(made by tools/make_fixtures.py with diffusers itself), on the CPU in float32: the same seed gives the
same latents and pictures as the unpatched pipeline, the engine's kernels ran (no fallback), and
restore() gives back diffusers' own computation bit for bit."""

import os

import pytest
import torch

import hipdiffusion
from hipdiffusion import ops

if os.environ.get("HIPDIFFUSION_TESTS_NEED_DIFFUSERS"):
    # tools/python/test.sh installs both: a missing one is a failure there, not a skip.
    import diffusers
    import transformers  # noqa: F401
else:
    diffusers = pytest.importorskip("diffusers")
    pytest.importorskip("transformers")  # the pipelines' text encoders


def latents(pipe, **kwargs):
    generator = torch.Generator("cpu").manual_seed(7)
    args = dict(prompt="a red square", negative_prompt="blurry", num_inference_steps=3, guidance_scale=7.5,
                output_type="latent", generator=generator)
    args.update(kwargs)
    return pipe(**args).images


def relative_l2(a, b):
    return ((a - b).norm() / b.norm()).item()


class CallCounter:
    def __init__(self, monkeypatch):
        self.counts = {}
        self.fused_norms = 0  # GroupNorms that took the SiLU after them (the ResNet blocks')
        for name in ("attention", "group_norm", "geglu"):
            original = getattr(ops, name)
            monkeypatch.setattr(ops, name, self._counting(name, original))

    def _counting(self, name, original):
        def wrapper(*args, **kwargs):
            self.counts[name] = self.counts.get(name, 0) + 1
            self.fused_norms += bool(kwargs.get("silu"))
            return original(*args, **kwargs)

        return wrapper


def check_pipeline(pipe, monkeypatch, **kwargs):
    # 64x64 pictures: the tiny models are quick at any size, the CPU is not (img2img takes its image's).
    size = {} if "image" in kwargs else dict(height=64, width=64)
    before = latents(pipe, **size, **kwargs)
    picture_before = pipe.vae.decode(before / pipe.vae.config.scaling_factor).sample
    counter = CallCounter(monkeypatch)
    hipdiffusion.diffusers.optimize(pipe)
    try:
        after = latents(pipe, **size, **kwargs)
        picture_after = pipe.vae.decode(after / pipe.vae.config.scaling_factor).sample
    finally:
        hipdiffusion.diffusers.restore(pipe)
    # The latents reach ~80 in magnitude (the first Euler step multiplies noise by sigma_max); the engine's
    # float32 kernels and PyTorch's round differently, which three steps carry along: measured 5.3e-6.
    assert relative_l2(after, before) < 1e-5
    assert (after - before).abs().max() < 1e-5 * before.abs().max()
    assert relative_l2(picture_after, picture_before) < 1e-5
    assert hipdiffusion.fallback_report() == []
    assert counter.counts.get("attention", 0) > 0 and counter.counts.get("group_norm", 0) > 0
    assert counter.counts.get("geglu", 0) > 0 and counter.fused_norms > 0
    restored = latents(pipe, **size, **kwargs)
    torch.testing.assert_close(restored, before, atol=0, rtol=0)


def test_sd1_same_latents_and_pictures(sd1, monkeypatch):
    check_pipeline(sd1, monkeypatch)


def test_sdxl_same_latents_and_pictures(sdxl, monkeypatch):
    # SDXL's transformers hand back NCHW-contiguous images: the ResNet blocks after them turn them back to
    # channels_last, so nothing falls back here either.
    check_pipeline(sdxl, monkeypatch)


def test_sd1_img2img_same_latents(sd1, monkeypatch):
    """img2img adds the VAE encoder (its mid-block attention and GroupNorms) in front."""
    pipe = diffusers.StableDiffusionImg2ImgPipeline(**sd1.components)
    image = torch.rand(1, 3, 64, 64, generator=torch.Generator("cpu").manual_seed(3))
    check_pipeline(pipe, monkeypatch, image=image, strength=0.7)


def test_restore_gives_back_diffusers_processors(sd1):
    before = {name: type(p) for name, p in sd1.unet.attn_processors.items()}
    hipdiffusion.diffusers.optimize(sd1)
    assert all(isinstance(p, hipdiffusion.diffusers.AttnProcessor) for p in sd1.unet.attn_processors.values())
    hipdiffusion.diffusers.optimize(sd1)  # twice: harmless
    hipdiffusion.diffusers.restore(sd1)
    assert {name: type(p) for name, p in sd1.unet.attn_processors.items()} == before
    assert all("forward" not in vars(m) for m in sd1.unet.modules())


def test_masked_attention_falls_back_to_the_original_processor(sd1):
    hipdiffusion.diffusers.optimize(sd1)
    try:
        attn = sd1.unet.down_blocks[0].attentions[0].transformer_blocks[0].attn2
        x = torch.randn(2, 16, attn.query_dim)
        context = torch.randn(2, 5, attn.cross_attention_dim)
        mask = torch.zeros(2, 1, 5)
        mask[:, :, 3:] = -10000.0
        got = attn(x, encoder_hidden_states=context, attention_mask=mask)
        want = attn.processor.original(attn, x, context, mask)
        torch.testing.assert_close(got, want)
    finally:
        hipdiffusion.diffusers.restore(sd1)
    assert [r["reason"] for r in hipdiffusion.fallback_report()] == ["attention mask"]


def test_modes(sd1):
    with pytest.raises(ValueError, match="mode must be"):
        hipdiffusion.diffusers.optimize(sd1, mode="fast")
    with pytest.raises(ValueError, match="neither a unet nor a vae"):
        hipdiffusion.diffusers.optimize(object())


@pytest.mark.skipif(not (torch.cuda.is_available() and hipdiffusion.gpu_build()),
                    reason="needs a GPU and a GPU build of the package")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_latents_as_close_to_float32_as_diffusers_own(sd1, dtype):
    """On the GPU in f16/bf16, the patched pipeline's latents are as close to the float32 pipeline's as
    the unpatched pipeline's are: the half-precision error is the precision's, not added by our kernels.
    (The two half-precision runs differ from each other by about that much too: 7.5e-3 in f16 and 6.4e-2
    in bf16 relative L2, measured on the H100.)"""
    kwargs = dict(prompt="a red square", negative_prompt="blurry", num_inference_steps=3, output_type="latent",
                  height=64, width=64)

    def run(pipe):
        return pipe(generator=torch.Generator("cpu").manual_seed(7), **kwargs).images.float()

    try:
        reference = run(sd1.to("cuda", torch.float32))
        pipe = sd1.to("cuda", dtype)
        theirs = run(pipe)
        hipdiffusion.diffusers.optimize(pipe)
        ours = run(pipe)
        hipdiffusion.diffusers.restore(pipe)
    finally:
        sd1.to("cpu", torch.float32)
    assert hipdiffusion.fallback_report() == []
    assert relative_l2(ours, reference) < 1.5 * relative_l2(theirs, reference) + 1e-3
