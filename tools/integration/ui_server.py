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
