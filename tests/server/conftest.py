"""The server's tests with real clients: `hipdiffusion serve` started as a process on a free loopback port
(the CLI of the README's build, build/cpu/hipdiffusion, or $HD_CLI), on the tiny SD1.x fixture model."""
import base64
import io
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("HD_CLI", ROOT / "build" / "cpu" / "hipdiffusion"))
TINY = ROOT / "tests" / "fixtures" / "models" / "tiny_sd1"


class Server:
    """A running `hipdiffusion serve`: its process, its base URL, and its log so far."""

    def __init__(self, *args: str, timeout: float = 60):
        if not CLI.exists():
            pytest.fail(f"{CLI} is missing: build the cpu preset first (the README's test command does)")
        self.process = subprocess.Popen([str(CLI), "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        ready = threading.Event()
        self.url = ""

        def read() -> None:  # the log, drained for the process's whole life (a full pipe would block it)
            for line in self.process.stderr:
                self.lines.append(line)
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    self.url = found.group(1)
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(timeout) or not self.url:
            self.stop()
            pytest.fail("the server did not start: " + "".join(self.lines))

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def log(self) -> str:
        return "".join(self.lines)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self.reader.join(5)
        return code


def picture_seeds(answer: dict) -> list[int]:
    """The seeds an answer's pictures say they were made from (each PNG's parameters text): a picture sent
    to the wrong request would show another request's seed here, whatever the answer's info claims."""
    from PIL import Image

    seeds = []
    for image in answer["images"]:
        text = Image.open(io.BytesIO(base64.b64decode(image))).info["parameters"]
        seeds.append(int(re.search(r"Seed: (\d+)", text).group(1)))
    return seeds


def send_txt2img_unread(host: str, port: int, body: dict) -> socket.socket:
    """A whole txt2img request sent over a connection of its own, its answer left unread: the socket."""
    payload = json.dumps(body).encode()
    client = socket.create_connection((host, port), timeout=30)
    client.sendall(b"POST /sdapi/v1/txt2img HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return client


def leave_while_sampling(server: Server, host: str, port: int, body: dict) -> None:
    """Sends `body` to host:port (the server, or a proxy in front of it), closes the connection once the
    server has taken a step, and checks that the server cancels: nothing queued or running within 3 s
    (it looks every 100 ms), and its log says why."""
    import requests

    client = send_txt2img_unread(host, port, body)
    deadline = time.time() + 120
    while requests.get(f"{server.url}/sdapi/v1/progress").json()["state"]["sampling_step"] < 1:
        assert time.time() < deadline, "no step within the time"
        time.sleep(0.01)
    client.close()
    closed = time.time()
    while requests.get(f"{server.url}/sdapi/v1/progress").json()["state"]["job_count"]:
        assert time.time() - closed < 3, "the pictures of a client who left are still being made"
        time.sleep(0.05)
    assert "closed its connection: its request's unfinished pictures are cancelled" in server.log()


@pytest.fixture
def start_server():
    started: list[Server] = []

    def start(*args: str) -> Server:
        server = Server(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
