"""The nodes in ComfyUI's V3 form (comfy_api.latest): what comfy_entrypoint() offers, with the same node
ids as the V1 classes, so that a saved workflow loads in either."""

from comfy_api.latest import ComfyExtension, io

from . import nodes

_TYPES = {"MODEL": io.Model, "LATENT": io.Latent, "VAE": io.Vae, "IMAGE": io.Image}


def _v3_class(node: nodes.Node) -> type:
    def define_schema(cls) -> io.Schema:
        return io.Schema(node_id=node.node_id, display_name=node.display_name, category=nodes.CATEGORY,
                         description=node.description,
                         inputs=[_TYPES[kind].Input(name) for name, kind in node.inputs],
                         outputs=[_TYPES[node.output].Output()])

    def execute(cls, **kwargs) -> io.NodeOutput:
        return io.NodeOutput(node.run(*(kwargs[name] for name, _ in node.inputs)))

    return type(node.node_id, (io.ComfyNode,), {"define_schema": classmethod(define_schema),
                                                "execute": classmethod(execute)})


class HipDiffusionExtension(ComfyExtension):
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return [_v3_class(node) for node in nodes.NODES]
