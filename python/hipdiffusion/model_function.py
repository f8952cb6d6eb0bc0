"""A UNet through the engine as a model function wrapper of ComfyUI's lineage (ComfyUI, Forge).

Both UIs call `model_options["model_function_wrapper"](apply_model, {"input", "timestep", "c", ...})`
for each step, and both wrap the diffusion model in the same arithmetic: the model sampling's input
scaling, its timestep, its denoised output (ComfyUI's BaseModel._apply_model, Forge's
KModel.apply_model). EngineModelFunction does that arithmetic with the engine's whole UNet in the
middle, on the model's own parameters (viewed, not copied); anything else runs the UI's own apply_model,
counted in hipdiffusion.fallback_report() under the UI's op name with the reason. A subclass names the
UI: its op name, where its model sampling lives, and which models it refuses.

The engine's model is held_unet.HeldUnet's, over the model's parameters: made again when the UI changes
them, at the next call for a move or an in-place change, at the next sampling run for replaced
parameters. release() drops it (a UI's cleanup callback after sampling), so that it holds no weights the
UI has unloaded.
"""

import logging
from typing import Optional

import torch

from . import fallback
from .held_unet import HeldUnet

_log = logging.getLogger("hipdiffusion")
# What the UI may pass in `c` that the engine takes (anything else falls back).
_KNOWN_CONDITIONINGS = {"c_crossattn", "c_concat", "control", "transformer_options", "y"}
# transformer_options entries that change what the diffusion model computes.
_PATCHING_OPTIONS = ("patches", "patches_replace", "wrappers")


class EngineModelFunction:
    """The model function wrapper. One per patched model; its clones share it (and its engine model).

    Per call only the call's own inputs are checked and the weights' signature taken; the weights are
    checked and the engine's model built when that signature changes. Where the UI calls release() after
    each sampling run, the model's parameter list is walked once per run, else at every call (a walk costs
    about a millisecond on SD1.5's UNet)."""

    op = "unet"  # the fallback report's op name
    ui = "the UI"  # for the announcement
    announce = staticmethod(_log.info)  # how the UI shows its user a line (ComfyUI logs at INFO)

    def __init__(self, base_model, previous=None):
        self.base_model = base_model
        self.previous = previous  # a wrapper the model had already: it gets our apply_model as its own
        self.release_on_cleanup = False
        self.calls = 0  # calls the engine computed
        self._held = HeldUnet(self.ui, self.announce)
        self._parameters = None  # (name, parameter) pairs of the diffusion model, walked at a call

    def sampling(self):
        """The model sampling: calculate_input(sigma, x), timestep(sigma), calculate_denoised(sigma, out, x)."""
        raise NotImplementedError

    def model_unsupported(self) -> Optional[str]:
        """None when the engine can build this model's UNet; else why not."""
        raise NotImplementedError

    def __deepcopy__(self, memo):  # the patchers' clone deep-copies model_options
        return self

    def __call__(self, apply_model, args):
        if self.previous is not None:
            return self.previous(self.apply_model, args)
        return self.apply_model(args["input"], args["timestep"], **args["c"])

    def release(self, *args) -> None:
        """Drops the engine's model and what was decided about the weights: nothing of the UI's weights
        is kept alive past a run; the next call starts afresh."""
        self._parameters = None
        self._held.release()

    def call_unsupported(self, c: dict) -> Optional[str]:
        """None when the engine takes this call's conditioning and options; else why not."""
        unknown = sorted(set(c) - _KNOWN_CONDITIONINGS)
        if unknown:
            return "conditionings the engine has no input for: " + ", ".join(unknown)
        if c.get("control") is not None:
            return "ControlNet residuals"
        options = c.get("transformer_options") or {}
        for key in _PATCHING_OPTIONS:
            if options.get(key):
                return f"transformer_options['{key}'] (patches the diffusion model)"
        if c.get("c_crossattn") is None:
            return "no cross-attention context"
        return self.model_unsupported()

    def _weights(self, device: torch.device):
        """(the engine's model over the current weights, None) or (None, why there is none)."""
        if self._parameters is None or not self.release_on_cleanup:
            self._parameters = list(self.base_model.diffusion_model.named_parameters())
        return self._held.engine(self.base_model, self.base_model.diffusion_model, self._parameters, device)

    def apply_model(self, x: torch.Tensor, t: torch.Tensor, **c) -> torch.Tensor:
        """The UI's apply_model(x, sigma, **c), through the engine where it can."""
        engine, reason = None, self.call_unsupported(c)
        if reason is None:
            engine, reason = self._weights(x.device)
        if reason is not None:
            fallback.record(self.op, reason)
            return self.base_model.apply_model(x, t, **c)
        sampling = self.sampling()
        sigma = t
        xc = sampling.calculate_input(sigma, x)
        if c.get("c_concat") is not None:  # inpainting models: the mask and masked image as extra channels
            xc = torch.cat([xc, c["c_concat"].to(xc.device, xc.dtype)], dim=1)
        timesteps = sampling.timestep(sigma).float()
        context = c["c_crossattn"].to(x.device, engine.dtype)
        y = c.get("y")
        y = y.to(x.device, engine.dtype) if y is not None else None
        with torch.no_grad():
            output = engine(xc.to(engine.dtype), timesteps, context, text_embeds=y)
        self.calls += 1
        return sampling.calculate_denoised(sigma, output.float(), x)
