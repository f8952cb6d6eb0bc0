"""The nodes in ComfyUI's original (V1) form: NODE_CLASS_MAPPINGS, for ComfyUI versions without V3."""

from . import nodes


def _v1_class(node: nodes.Node) -> type:
    def run(self, **kwargs):
        return (node.run(*(kwargs[name] for name, _ in node.inputs)),)

    return type(node.node_id, (), {
        "CATEGORY": nodes.CATEGORY, "DESCRIPTION": node.description, "RETURN_TYPES": (node.output,),
        "FUNCTION": "run", "run": run,
        "INPUT_TYPES": classmethod(lambda cls: {"required": {name: (kind,) for name, kind in node.inputs}}),
    })


NODE_CLASS_MAPPINGS = {node.node_id: _v1_class(node) for node in nodes.NODES}
NODE_DISPLAY_NAME_MAPPINGS = {node.node_id: node.display_name for node in nodes.NODES}
