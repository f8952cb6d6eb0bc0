"""hipDiffusion's AUTOMATIC1111 / Forge extension: the parts that import without the UI (status) and
the registration, which imports only the modules of the UI that loaded it."""
