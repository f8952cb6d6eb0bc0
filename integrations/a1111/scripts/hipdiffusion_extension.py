"""hipDiffusion in AUTOMATIC1111 and Forge: the web UI loads this file at start (the extension's folder
is then on sys.path, so its package imports). What is registered depends on the UI (registration.py)."""

from hipdiffusion_a1111 import registration

registration.register()

if registration.on_forge() and registration.package_unavailable() is None:
    # Forge collects the Script subclasses found in this module.
    from hipdiffusion_a1111.forge_script import HipDiffusionForge  # noqa: F401
