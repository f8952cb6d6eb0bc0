"""What the extension registers, by the UI that loaded it.

AUTOMATIC1111: the attention as a cross-attention optimization (its on_list_optimizers) and the UNet as
an "SD Unet" option (on_list_unets). Forge: neither hook is used by its backend any more (its
sd_hijack_optimizations is commented out), so a script patches forge_objects.unet instead
(forge_script.py). Both: a "hipDiffusion" section in Settings saying what is available and why not.
"""

import importlib.util
import logging
from typing import Optional

_log = logging.getLogger("hipdiffusion")


def on_forge() -> bool:
    return importlib.util.find_spec("modules_forge") is not None


def package_unavailable() -> Optional[str]:
    """None when the hipdiffusion package imports; else why not (the extension then registers nothing)."""
    try:
        import hipdiffusion  # noqa: F401
    except ImportError as e:
        return (f"the hipdiffusion package does not import ({e}): install it into this web UI's Python with "
                "`pip install <hipDiffusion checkout>/python`")
    return None


def status_html() -> str:
    """The Settings section's text: what this extension offers here, and where to select it."""
    reason = package_unavailable()
    if reason is not None:
        return f"<p><b>hipDiffusion is off</b>: {reason}.</p>"
    from hipdiffusion import _library

    kernels = "GPU and CPU" if _library.GPU_BUILD else "CPU only (this build has no GPU kernels)"
    if on_forge():
        where = ("Forge: choose <i>Attention</i> or <i>Whole UNet</i> in the <i>hipDiffusion</i> panel of "
                 "txt2img/img2img.")
    else:
        where = ("Settings &gt; Optimizations &gt; <i>Cross attention optimization</i>: <b>hipDiffusion</b>; "
                 "Settings &gt; Stable Diffusion &gt; <i>SD Unet</i>: <b>hipDiffusion</b> (the whole UNet).")
    return (f"<p>hipDiffusion's kernels: {kernels}. {where} What the engine does not take runs the web "
            "UI's own path and is listed, with the reason, in the console.</p>")


def register() -> None:
    from modules import script_callbacks

    script_callbacks.on_ui_settings(_settings)
    reason = package_unavailable()
    if reason is not None:
        _log.error("hipdiffusion: %s", reason)
        return
    if on_forge():
        return  # forge_script.HipDiffusionForge, imported by the scripts file
    script_callbacks.on_list_optimizers(_list_optimizers)
    script_callbacks.on_list_unets(_list_unets)


def _list_optimizers(optimizers: list) -> None:
    from modules import devices, sd_hijack_optimizations

    from .attention import make_optimization

    optimizers.append(make_optimization(sd_hijack_optimizations, devices))


def _list_unets(unets: list) -> None:
    from .unet import HipDiffusionUnetOption

    unets.append(HipDiffusionUnetOption())


def _settings() -> None:
    from modules import shared

    info = shared.OptionHTML(status_html())
    info.section = ("hipdiffusion", "hipDiffusion")
    shared.opts.add_option("hipdiffusion_status", info)
