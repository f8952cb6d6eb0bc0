"""The engine's UNet over a UI's LDM UNetModel (ComfyUI's, A1111's, Forge's), on the model's own
parameters, made again when they change.

The engine's model views the parameters (nothing copied); its convolution kernels must be in
channels_last memory, so those parameters are converted in place the first time (the UI's own
convolutions compute the same with them). held.signature tells when the UI changed the weights
(replaced, moved or patched in place); the next call then checks them again and builds anew.
"""

from typing import Optional, Tuple

import torch

from . import held
from .engine import EngineUnet


class HeldUnet:
    def __init__(self, ui: str, announce):
        self.ui = ui  # for the announcement: "ComfyUI", "A1111", "Forge"
        self.announce = announce  # how the UI shows a line to its user (a logger's info, print)
        self.release()

    def release(self) -> None:
        """Forgets the engine's model and what was decided about the weights."""
        self._signature = None  # of the weights the two below were decided on
        self._engine: Optional[EngineUnet] = None
        self._refusal: Optional[str] = None  # why no engine model over those weights

    def engine(self, owner, model: torch.nn.Module, named: list,
               device: torch.device) -> Tuple[Optional[EngineUnet], Optional[str]]:
        """(the engine's model over `named`, the model's current (name, parameter) pairs, and None), or
        (None, why there is none). `owner` is what carries the UI's patch id, if any (held.signature)."""
        if held.signature(owner, named) != self._signature:
            self._engine, self._refusal = None, held.weights_unsupported(model, named)
            if self._refusal is None:
                try:
                    self._engine = self._build(model, named)
                except (ValueError, RuntimeError) as e:  # the engine refused these weights: say why
                    self._refusal = f"the engine could not build this UNet: {e}"
            self._signature = held.signature(owner, named)  # after the layout change
        if self._engine is not None and named[0][1].device != device:
            return None, "an input on another device than the weights"
        return self._engine, self._refusal

    def _build(self, model: torch.nn.Module, named: list) -> EngineUnet:
        held.in_engine_layout(named)
        tensors = [p.detach() for _, p in named]
        engine = EngineUnet.from_weights([name for name, _ in named], tensors, held.ldm_unet_config_json(model),
                                         ldm_names=True)
        self.announce(f"hipdiffusion: {self.ui}'s UNet through the engine ({len(named)} tensors held, "
                      f"{engine.dtype} on {tensors[0].device})")
        return engine
