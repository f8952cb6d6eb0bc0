"""hipDiffusion for ComfyUI: the engine's attention, whole UNet and exact tiled VAE as nodes.

Where ComfyUI has the V3 node API (comfy_api.latest), the nodes come through comfy_entrypoint(); older
ComfyUI versions get the same nodes, by the same ids, through NODE_CLASS_MAPPINGS (ComfyUI takes
NODE_CLASS_MAPPINGS first when a package has both, so only one of them is defined). Loading the package
also registers the attention function under the name "hipdiffusion" (register_attention_function).
"""

import importlib.util

from . import attention

attention.register()

if importlib.util.find_spec("comfy_api") is not None and importlib.util.find_spec("comfy_api.latest") is not None:
    async def comfy_entrypoint():
        from .nodes_v3 import HipDiffusionExtension

        return HipDiffusionExtension()
else:
    from .nodes_v1 import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS  # noqa: F401
