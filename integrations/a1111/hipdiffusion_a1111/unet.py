"""The loaded SD1.x/2.x/SDXL model's UNet through the engine, as an AUTOMATIC1111 "SD Unet" option.

A1111 replaces UNetModel.forward (ldm's and sgm's) with one that calls the selected SdUnet (Settings >
Stable Diffusion > SD Unet, the dropdown NVIDIA's TensorRT extension fills too): forward(x, timesteps,
context, y=None) with x already scaled by the sampler, the timesteps as the model's, `y` SDXL's added
embedding input. That is the engine's UNet call as it is, on the model's own parameters (viewed, not
copied; the convolution kernels converted to channels_last memory in place once, which A1111's own
convolutions compute the same with).

Weights A1111 changes are noticed (held.signature: addresses, version counters) and the engine's model
made again. The built-in Lora extension changes weights lazily, in each layer's forward, which the
engine does not call: so before each step its network_apply_weights is run over the UNet's layers (what
those forwards would have done), unless it runs functionally (the lora_functional option), which falls
back. Anything else the engine does not take runs A1111's own UNetModel.forward, counted in
hipdiffusion.fallback_report() under "a1111.unet" with the reason: hypernetworks (applied inside A1111's
attention), low-VRAM mode, inputs the engine has no argument for, a dtype or device without kernels.
"""

import sys
from typing import Optional

import torch

from hipdiffusion import fallback
from hipdiffusion.held_unet import HeldUnet
from modules import devices, sd_hijack, sd_unet, shared

LABEL = "hipDiffusion"
_OP = "a1111.unet"


# The layer types whose forward A1111's Lora extension replaces with one that applies the networks
# (networks.network_apply_weights takes only these: other modules carry a layer name but no weight).
_LORA_LAYERS = (torch.nn.Linear, torch.nn.Conv2d, torch.nn.GroupNorm, torch.nn.LayerNorm, torch.nn.MultiheadAttention)


def _lora_module():
    """A1111's built-in Lora extension's `networks` module, where it is loaded."""
    networks = sys.modules.get("networks")
    return networks if hasattr(networks, "network_apply_weights") else None


class HipDiffusionUnet(sd_unet.SdUnet):
    def __init__(self):
        super().__init__()
        self.calls = 0  # calls the engine computed
        # A1111 leaves logging unconfigured (warnings only): what the user should see is printed, as
        # A1111's own is.
        self._held = HeldUnet("A1111", print)

    def activate(self):
        # A1111 moved the UNet's weights to the CPU, as an option bringing weights of its own (TensorRT's)
        # wants; the engine computes on these weights, so they go back where the model runs.
        if not shared.sd_model.lowvram:
            shared.sd_model.model.diffusion_model.to(devices.device)

    def deactivate(self):
        self._held.release()

    def call_unsupported(self, args: tuple, kwargs: dict) -> Optional[str]:
        """None when the engine takes this call; else why not."""
        unknown = sorted(set(kwargs) - {"y"}) + (["positional arguments"] if any(a is not None for a in args) else [])
        if unknown:  # named: SDXL's `y` beside one the engine lacks must not read as the unsupported one
            return "inputs the engine has no argument for: " + ", ".join(unknown)
        if shared.loaded_hypernetworks:
            return "hypernetworks (applied inside A1111's attention)"
        if shared.sd_model.lowvram:
            return "low-VRAM mode (--lowvram/--medvram move the weights block by block)"
        networks = _lora_module()
        if networks is not None and networks.loaded_networks and getattr(shared.opts, "lora_functional", False):
            return "Lora applied functionally (the lora_functional option)"
        return None

    def _weights(self, model: torch.nn.Module, device: torch.device):
        """(the engine's model over the current weights, None) or (None, why there is none)."""
        networks = _lora_module()
        if networks is not None:  # what each layer's forward would do first: bring the Lora weights in
            for module in model.modules():
                if isinstance(module, _LORA_LAYERS):
                    networks.network_apply_weights(module)
        return self._held.engine(model, model, list(model.named_parameters()), device)

    def forward(self, x, timesteps=None, context=None, *args, **kwargs):
        model = shared.sd_model.model.diffusion_model
        engine, reason = None, self.call_unsupported(args, kwargs)
        if reason is None:
            engine, reason = self._weights(model, x.device)
        if reason is not None:
            fallback.record(_OP, reason)
            original = sd_hijack.sgm_original_forward if type(model).__module__.startswith("sgm.") \
                else sd_hijack.ldm_original_forward
            return original(model, x, timesteps, context, *args, **kwargs)
        y = kwargs.get("y")
        with torch.no_grad():
            out = engine(x.to(engine.dtype), timesteps, context.to(engine.dtype),
                         text_embeds=y.to(engine.dtype) if y is not None else None)
        self.calls += 1
        return out.to(x.dtype)


class HipDiffusionUnetOption(sd_unet.SdUnetOption):
    label = LABEL
    model_name = None  # any checkpoint: the engine reads the loaded model's own weights

    def create_unet(self):
        return HipDiffusionUnet()
