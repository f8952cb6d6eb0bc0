"""Run by the web UI at start (launch.py, unless --skip-install). The hipdiffusion package is built from
source (CMake, and for a GPU the CUDA or ROCm toolkit), which a web UI's start must not attempt: this
only says, in the console, whether it is there and how to install it."""

import launch

if not launch.is_installed("hipdiffusion"):
    print("hipDiffusion extension: the hipdiffusion package is not installed in this web UI's Python "
          f"({launch.python}). Install it with: {launch.python} -m pip install <hipDiffusion checkout>/python "
          "(its README says which toolkits each build needs). Until then the extension registers nothing.")
