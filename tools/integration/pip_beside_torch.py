#!/usr/bin/env python3
"""Installs a UI's pinned requirements into a virtual environment that takes PyTorch from beside it
(build/venv's, through a .pth file), without letting pip replace or duplicate that PyTorch.

A UI pins packages that themselves require torch, and torchvision pins one torch release exactly: pip's
resolver would install a second PyTorch. (torchvision's Python parts, which the UIs import, work beside
a newer PyTorch; its compiled operators may not load, and are not used by the runs here.) Instead every package goes in without its dependencies, and
`pip check` says what is still missing or at a version outside what a package asks; those are installed
the same way with the range asked, until nothing but PyTorch is left to complain about. What stays in
conflict after that is printed (not an error: the run that follows shows whether it matters).

  usage: pip_beside_torch.py VENV_PYTHON REQUIREMENTS_FILE [EXTRA_REQUIREMENT ...]
  e.g. ... requirements_versions.txt torchvision==0.29.2
"""
import re
import subprocess
import sys

TORCH = {"torch"}  # what comes from beside; torchvision is installed, without its exact torch pin
MISSING = re.compile(r"^\S+ \S+ requires (\S+), which is not installed\.$")
MISMATCH = re.compile(r"^\S+ \S+ has requirement (.+), but you have (\S+) \S+\.$")


def pip(python: str, *args: str) -> str:
    run = subprocess.run([python, "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True, text=True)
    if args[0] == "install" and run.returncode != 0:
        sys.exit(f"pip_beside_torch: pip {' '.join(args)} failed:\n{run.stderr}")
    return run.stdout


def name_of(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, 1)[0].strip().lower().replace("_", "-")


def main() -> None:
    python, path, *extra = sys.argv[1:]
    lines = [line.split("#", 1)[0].strip() for line in open(path, encoding="utf-8").read().replace("\r", "").splitlines()]
    wanted = [r for r in lines + extra if r and name_of(r) not in TORCH]
    pip(python, "install", "-q", "--no-deps", *wanted)
    pinned = {name_of(r) for r in wanted}  # the UI's own pins are kept as given
    left = []
    for _ in range(10):
        todo, left = [], []
        for line in pip(python, "check").splitlines():
            missing, mismatch = MISSING.match(line), MISMATCH.match(line)
            if missing and name_of(missing.group(1)) not in TORCH:
                todo.append(missing.group(1))
            elif mismatch and name_of(mismatch.group(1)) not in TORCH | pinned:
                todo.append(mismatch.group(1))
            elif not (missing or mismatch) or name_of((missing or mismatch).group(1)) not in TORCH:
                left.append(line)
        if not todo:
            break
        pip(python, "install", "-q", "--no-deps", *sorted(set(todo)))
    else:  # the last installs were not checked again
        print("pip_beside_torch: still unresolved after 10 rounds:", ", ".join(sorted(set(todo))))
    for line in left:
        print("pip_beside_torch: left in conflict:", line)


if __name__ == "__main__":
    main()
