"""hipdiffusion.diffusers.optimize(pipe, mode="engine") on the tiny SD1.x-like and SDXL-like pipelines of
the test fixtures (made by tools/make_fixtures.py with diffusers itself), on the CPU in float32: the whole
UNet and VAE through the engine, on the pipeline's own weights, give the unpatched pipeline's latents and
pictures; the weights are shared, not copied; a call the engine does not cover runs diffusers' own forward,
counted; restore() gives diffusers back bit for bit. On a GPU: the same in f16/bf16, with the UNet's
captured graph replayed."""

import copy
import os

import pytest
import torch

import hipdiffusion

if os.environ.get("HIPDIFFUSION_TESTS_NEED_DIFFUSERS"):
    import diffusers
    import transformers  # noqa: F401
else:
    diffusers = pytest.importorskip("diffusers")
    pytest.importorskip("transformers")

from hipdiffusion.engine import EngineUnet  # noqa: E402

GPU = torch.cuda.is_available() and hipdiffusion.gpu_build()


def latents(pipe, **kwargs):
    args = dict(prompt="a red square", negative_prompt="blurry", num_inference_steps=3, guidance_scale=7.5,
                output_type="latent", generator=torch.Generator("cpu").manual_seed(7))
    args.update(kwargs)
    if "image" not in kwargs:
        args.update(height=64, width=64)
    return pipe(**args).images


@torch.no_grad()  # as the pipelines decode (with gradients on, the engine is not used: counted)
def picture(pipe, lat):
    return pipe.vae.decode(lat / pipe.vae.config.scaling_factor).sample


def relative_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def check_engine(pipe, **kwargs):
    before = latents(pipe, **kwargs)
    picture_before = picture(pipe, before)
    hipdiffusion.diffusers.optimize(pipe, mode="engine")
    try:
        assert hasattr(pipe.unet, "_hipdiffusion_engine") and hasattr(pipe.vae, "_hipdiffusion_engine")
        after = latents(pipe, **kwargs)
        picture_after = picture(pipe, after)
    finally:
        hipdiffusion.diffusers.restore(pipe)
    # float32 on both sides; the engine's kernels round differently from PyTorch's, which three steps
    # carry along (latents reach ~80): measured 4.9e-6 (SD1.x).
    assert relative_l2(after, before) < 1e-5
    assert relative_l2(picture_after, picture_before) < 1e-5
    assert hipdiffusion.fallback_report() == []
    assert not any(hasattr(m, "_hipdiffusion_engine") or "forward" in vars(m) for m in (pipe.unet, pipe.vae))
    torch.testing.assert_close(latents(pipe, **kwargs), before, atol=0, rtol=0)


def test_sd1_engine_same_latents_and_pictures(sd1):
    check_engine(sd1)


def test_sdxl_engine_same_latents_and_pictures(sdxl):
    """SDXL's text-time conditioning (pooled text embedding and size ids) reaches the engine's UNet."""
    check_engine(sdxl)


def test_sd1_img2img_engine_same_latents(sd1):
    """img2img encodes its image with the engine's VAE encoder (diffusers samples the posterior)."""
    pipe = diffusers.StableDiffusionImg2ImgPipeline(**sd1.components)
    image = torch.rand(1, 3, 64, 64, generator=torch.Generator("cpu").manual_seed(3))
    check_engine(pipe, image=image, strength=0.7)


def unet_inputs(unet, generator_seed=1):
    g = torch.Generator("cpu").manual_seed(generator_seed)
    sample = torch.randn(2, unet.config.in_channels, 8, 8, generator=g)
    context = torch.randn(2, 77, unet.config.cross_attention_dim, generator=g)
    return sample, torch.tensor(500), context


@torch.no_grad()
def test_engine_shares_the_pipelines_weights(sd1):
    """The engine reads the parameters' own memory: a change made in place after optimize (as a fused
    LoRA's would be if made in place) is what the engine computes with, in the UNet and in the VAE."""
    hipdiffusion.diffusers.optimize(sd1, mode="engine")
    unet, vae = sd1.unet, sd1.vae
    try:
        unet.conv_out.bias.add_(0.25)
        vae.post_quant_conv.bias.add_(0.25)
        sample, t, context = unet_inputs(unet)
        ours = unet(sample, t, context).sample
        theirs = type(unet).forward(unet, sample, t, context).sample
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
        z = torch.randn(1, 4, 8, 8, generator=torch.Generator("cpu").manual_seed(2))
        torch.testing.assert_close(vae.decode(z).sample, type(vae).decode(vae, z).sample, rtol=1e-5, atol=1e-5)
    finally:
        unet.conv_out.bias.sub_(0.25)
        vae.post_quant_conv.bias.sub_(0.25)
        hipdiffusion.diffusers.restore(sd1)


@torch.no_grad()
def test_uncovered_calls_run_diffusers_forward_counted(sd1):
    """ControlNet's residuals (and the other arguments the engine does not take) and HIPDIFFUSION_DISABLE
    send the call to diffusers' own forward, listed in fallback_report()."""
    hipdiffusion.diffusers.optimize(sd1, mode="engine")
    unet = sd1.unet
    try:
        sample, t, context = unet_inputs(unet)
        down = tuple(torch.randn(2, c, s, s) for c, s in ((32, 8), (32, 8), (32, 8), (32, 4), (64, 4), (64, 4)))
        mid = torch.randn(2, 64, 4, 4)
        kwargs = dict(down_block_additional_residuals=down, mid_block_additional_residual=mid)
        got = unet(sample, t, context, **kwargs).sample
        want = type(unet).forward(unet, sample, t, context, **kwargs).sample
        torch.testing.assert_close(got, want, atol=0, rtol=0)
        hipdiffusion.set_enabled(False)
        torch.testing.assert_close(unet(sample, t, context).sample, type(unet).forward(unet, sample, t, context).sample,
                                   atol=0, rtol=0)
    finally:
        hipdiffusion.set_enabled(True)
        hipdiffusion.diffusers.restore(sd1)
    reasons = {(r["op"], r["reason"]) for r in hipdiffusion.fallback_report()}
    assert reasons == {("engine unet", "down_block_additional_residuals"), ("engine unet", "disabled")}


def test_engine_refuses_what_it_cannot_compute(sd1):
    """A float16 model on the CPU is a clear error at optimize, and the pipeline is left as it was."""
    half = copy.copy(sd1)
    half.unet = copy.deepcopy(sd1.unet).half()
    half.vae = sd1.vae
    with pytest.raises(ValueError, match="engine UNet: the CPU kernels compute in float32, not torch.float16"):
        hipdiffusion.diffusers.optimize(half, mode="engine")
    assert getattr(half, "_hipdiffusion_state", None) is None
    assert "forward" not in vars(half.unet) and "decode" not in vars(sd1.vae)
    assert sd1.vae.decoder.conv_in.weight.is_contiguous()
    # A kernel not in channels_last memory is refused by the engine's loader itself.
    with pytest.raises(ValueError, match="not in channels_last memory"):
        EngineUnet(sd1.unet)


def test_mode_switch_restores_first(sd1):
    hipdiffusion.diffusers.optimize(sd1)
    hipdiffusion.diffusers.optimize(sd1, mode="engine")
    assert not isinstance(next(iter(sd1.unet.attn_processors.values())), hipdiffusion.diffusers.AttnProcessor)
    assert "forward" in vars(sd1.unet) and "decode" in vars(sd1.vae)
    hipdiffusion.diffusers.optimize(sd1, mode="engine")  # twice: harmless
    hipdiffusion.diffusers.restore(sd1)
    assert "forward" not in vars(sd1.unet) and "decode" not in vars(sd1.vae) and "encode" not in vars(sd1.vae)


@pytest.mark.skipif(not GPU, reason="needs a GPU and a GPU build of the package")
@pytest.mark.parametrize("arch", ["sd1", "sdxl"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_engine_as_close_to_float32_as_diffusers_own(sd1, sdxl, arch, dtype):
    """On the GPU in f16/bf16, the engine's latents are as close to the float32 pipeline's as diffusers'
    own half-precision run, and after three steps (batch 2 for guidance) the UNet runs a captured graph."""
    base = sd1 if arch == "sd1" else sdxl

    def run(pipe):
        return latents(pipe).float()

    # Copies: the module's pipelines stay float32 on the CPU (a bfloat16 round trip would round their weights
    # for the tests after this one).
    reference = run(copy.deepcopy(base).to("cuda", torch.float32))
    pipe = copy.deepcopy(base).to("cuda", dtype)
    theirs = run(pipe)
    hipdiffusion.diffusers.optimize(pipe, mode="engine")
    ours = run(pipe)
    captured = pipe.unet._hipdiffusion_engine.captured_count()
    hipdiffusion.diffusers.restore(pipe)
    assert hipdiffusion.fallback_report() == []
    assert captured == 1
    assert relative_l2(ours, reference) < 1.5 * relative_l2(theirs, reference) + 1e-3


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not GPU, reason="needs a GPU and a GPU build of the package"))])
def test_engine_on_the_original_names_and_a_joined_added_embedding(device):
    """ComfyUI's models hold the original (LDM) names and hand SDXL's added conditioning over already
    joined (`y`: the pooled embedding, then each id's sinusoid). The engine over the tiny SDXL pipeline's
    single file by those names computes diffusers' UNet, given the ids or y (made here by diffusers' own
    add_time_proj); on a GPU each form replays a captured graph of its own."""
    import json

    from conftest import FIXTURES
    from safetensors.torch import load_file

    dtype = torch.float32 if device == "cpu" else torch.float16
    prefix = "model.diffusion_model."
    state = {k[len(prefix):]: v for k, v in load_file(str(FIXTURES / "tiny_sdxl_pipeline.safetensors")).items()
             if k.startswith(prefix)}
    tensors = [t.to(device, dtype).contiguous(memory_format=torch.channels_last) if t.dim() == 4
               else t.to(device, dtype) for t in state.values()]
    # diffusers' UNet from the pipeline's folder, not the module's pipeline, which other tests move around.
    unet = diffusers.UNet2DConditionModel.from_pretrained(str(FIXTURES / "tiny_sdxl_pipeline" / "unet"),
                                                          torch_dtype=torch.float32).eval()
    config = {k: v for k, v in dict(unet.config).items() if not k.startswith("_")}
    engine = EngineUnet.from_weights(list(state), tensors, json.dumps(config, default=list), ldm_names=True)

    g = torch.Generator().manual_seed(12)
    sample = torch.randn(2, unet.config.in_channels, 8, 8, generator=g)
    context = torch.randn(2, 5, unet.config.cross_attention_dim, generator=g)
    text_width = unet.config.projection_class_embeddings_input_dim - 6 * unet.config.addition_time_embed_dim
    text_embeds = torch.randn(2, text_width, generator=g)
    time_ids = torch.tensor([[64.0, 64.0, 0.0, 0.0, 64.0, 64.0], [96.0, 80.0, 8.0, 4.0, 64.0, 64.0]])
    with torch.no_grad():
        expected = unet(sample, 311.0, encoder_hidden_states=context,
                        added_cond_kwargs={"text_embeds": text_embeds, "time_ids": time_ids}).sample
        y = torch.cat([text_embeds, unet.add_time_proj(time_ids.flatten()).reshape(2, -1)], dim=1)

    def on(t):
        return t.to(device, dtype)

    tolerance = 1e-5 if device == "cpu" else 2e-2
    for _ in range(3):  # on a GPU: tune, capture, replay
        from_ids = engine(on(sample), 311.0, on(context), on(text_embeds), time_ids.to(device)).float().cpu()
        from_y = engine(on(sample), 311.0, on(context), on(y)).float().cpu()
        assert relative_l2(from_ids, expected) < tolerance
        assert relative_l2(from_y, expected) < tolerance
    if device == "cuda":
        assert engine.captured_count() == 2
