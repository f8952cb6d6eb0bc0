"""A UI's own server, started headless for the integration runs, and what the runs share: JSON over
HTTP, the server's start and stop, the pictures read back."""
import json
import os
import socket
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
    """Starts the server (its output to the open file `log`) and waits until `ready_url` answers."""
    server = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"{name} exited at start ({server.returncode}); see {log.name}")
        try:
            request(ready_url)
            return server
        except OSError:
            time.sleep(0.5)
    stop(server)
    raise SystemExit(f"{name} did not answer on {ready_url}; see {log.name}")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


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


def timed_ratios(seconds: dict, pairs: list) -> dict:
    """Each (ours, theirs) pair's time ratio, on each configuration's last (warm) run."""
    ratios = {f"{ours} / {theirs}": seconds[ours][-1] / seconds[theirs][-1] for ours, theirs in pairs}
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    return ratios
