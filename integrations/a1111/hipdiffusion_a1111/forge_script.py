"""Forge's panel: a "hipDiffusion" accordion in txt2img/img2img whose choice (MODES) patches each
generation's forge_objects.unet (forge.patch) in process_before_every_sampling, Forge's hook for it.
Where the route cannot work (a Forge without the hooks, a model that is not Stable Diffusion's UNet), the
console and the generation's infotext say why, and the UNet is left as Forge made it."""

import logging

import gradio as gr

from modules import scripts

from . import forge
from .registration import status_html

_log = logging.getLogger("hipdiffusion")


class HipDiffusionForge(scripts.Script):
    def title(self):
        return "hipDiffusion"

    def show(self, is_img2img):
        return scripts.AlwaysVisible

    def ui(self, is_img2img):
        with gr.Accordion("hipDiffusion", open=False):
            mode = gr.Radio(list(forge.MODES), value=forge.MODES[0], label="Run through hipDiffusion's engine")
            gr.HTML(status_html())
        return [mode]

    def process_before_every_sampling(self, p, mode, *args, **kwargs):
        if mode == forge.MODES[0]:
            return
        unet = getattr(getattr(p.sd_model, "forge_objects", None), "unet", None)
        reason = forge.route_unsupported(unet)
        if reason is not None:
            _log.warning("hipdiffusion: %s left as Forge runs it: %s", mode, reason)
            p.extra_generation_params["hipDiffusion"] = f"off ({reason})"
            return
        p.sd_model.forge_objects.unet = forge.patch(unet, mode)
        p.extra_generation_params["hipDiffusion"] = mode
