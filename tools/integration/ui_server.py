"""A UI's own server, started headless for the integration runs, and what the runs share: JSON over
HTTP, the server's start and stop, the pictures read back."""
import json
import os
import socket
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, body: dict | None = None, timeout: float = 30) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start(command: list, cwd: Path, log, ready_url: str, name: str, env: dict | None = None,
          seconds: float = 600) -> subprocess.Popen:
    """Starts the server (its output to the open file `log`) and waits until `ready_url` answers with
    JSON. Whatever ends the wait early (a timeout, an interrupt) ends the server too: the caller has no
    handle on it until this returns."""
    server = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"{name} exited at start ({server.returncode}); see {log.name}")
            try:
                request(ready_url)
                return server
            except (OSError, ValueError):  # not listening yet, or not yet answering with its API (JSON)
                time.sleep(0.5)
        raise SystemExit(f"{name} did not answer on {ready_url}; see {log.name}")
    except BaseException:
        stop(server)
        raise


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


def set_options(base: str, settings: dict, name: str) -> None:
    """A web UI's settings (A1111, Forge) through POST /sdapi/v1/options, which runs its own change
    handlers; checked back, as a setting it does not know is ignored."""
    request(f"{base}/sdapi/v1/options", settings, timeout=600)
    now = request(f"{base}/sdapi/v1/options")
    if any(now.get(k) != v for k, v in settings.items()):
        raise SystemExit(f"{name} did not take the settings {settings} (it has { {k: now.get(k) for k in settings} })")


def txt2img_body(size: int, steps: int) -> dict:
    """The web UIs' request (A1111's /sdapi/v1/txt2img fields): the same prompt, seed and sampler in every run."""
    return {"prompt": "a red cube on a blue table", "negative_prompt": "blurry", "seed": 1234, "steps": steps,
            "width": size, "height": size, "sampler_name": "Euler", "scheduler": "Karras", "cfg_scale": 7}


def txt2img_timed(base: str, body: dict, repeats: int) -> tuple[dict, list]:
    """POST /sdapi/v1/txt2img 1 + `repeats` times (the first pays the first use of each shape; warm_median
    leaves it out): (the last response, each run's wall seconds)."""
    seconds = []
    for _ in range(1 + repeats):
        begin = time.perf_counter()
        result = request(f"{base}/sdapi/v1/txt2img", body, timeout=1800)
        seconds.append(time.perf_counter() - begin)
    return result, seconds


def add_run_arguments(parser, ui: str) -> None:
    """The arguments every web UI run takes (its checkout's folder is the UI's own)."""
    parser.add_argument("--python", required=True)
    parser.add_argument("--extension", required=True, type=Path, help="the extension's folder (integrations/a1111)")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(f"--{ui}-args", default="", help=f"more arguments for {ui}'s launch.py")


def load_image(path_or_bytes):
    import io

    import numpy as np
    from PIL import Image

    source = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    return np.asarray(Image.open(source)).astype(np.int32)


def finish(out: Path, summary: dict, failures: list, success: str) -> None:
    """Writes the run's summary.json; exits non-zero naming the failed checks, else prints `success`."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if failures:
        raise SystemExit("FAILED: " + "; ".join(failures))
    print(f"{success} ({out / 'summary.json'})")


def compare_pictures(pictures: dict, pairs: list, limit: int, failures: list) -> dict:
    """The largest difference, in levels of 255, of each (ours, theirs) pair of pictures; a pair above
    `limit`, or a flat "stock" picture (a comparison that would show nothing), goes to `failures`."""
    checks = {f"{ours} picture vs {theirs} (max levels)": int(abs(pictures[ours] - pictures[theirs]).max())
              for ours, theirs in pairs}
    for name, value in checks.items():
        ok = value <= limit
        print(f"{name}: {value} (limit {limit}) {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(name)
    if float(pictures["stock"].std()) < 1.0:
        failures.append("the stock picture is flat: the comparison would show nothing")
    return checks


def engine_lines(log_text: str, ran: dict, ops: str, failures: list) -> tuple[dict, list]:
    """Whether each of `ran`'s console lines (kind -> line) is in the UI's log, and the fallback lines;
    a line missing, or a fallback of an op starting with `ops` (e.g. "a1111."), goes to `failures`."""
    seen = {kind: line in log_text for kind, line in ran.items()}
    for kind, present in seen.items():
        print(f"the engine's {kind} ran: {present}")
        if not present:
            failures.append(f"the engine's {kind} did not run")
    fell_back = [line for line in log_text.splitlines() if "falls back to PyTorch" in line]
    for line in fell_back:
        print("fallback:", line)
        if ops in line:
            failures.append(line)
    return seen, fell_back


def warm_median(runs: list) -> float:
    """The median of a configuration's runs after its first (which pays the first use of its shapes)."""
    return statistics.median(runs[1:] or runs)


def timed_ratios(seconds: dict, pairs: list) -> dict:
    """Each (ours, theirs) pair's time ratio, on each configuration's warm median."""
    ratios = {f"{ours} / {theirs}": warm_median(seconds[ours]) / warm_median(seconds[theirs]) for ours, theirs in pairs}
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    return ratios
