"""Scaling past one process: two servers behind nginx (Debian's package) on loopback, the arrangement the
README shows. One server is killed mid-run; nginx's retry on the other answers every request, because a
server keeps nothing between requests that another would need. A client that leaves nginx gets its
pictures cancelled on the server behind it too."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

from conftest import TINY, leave_while_sampling, picture_seeds

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_config(prefix, port: int, upstreams: list[int]) -> str:
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=60s;" for p in upstreams)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    return f"""{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  client_max_body_size 32m;
  upstream hipdiffusion {{
{servers}
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://hipdiffusion;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 600s;
      # A generation is stateless: one that a dead server was making is made again by the other.
      proxy_next_upstream error timeout http_502 http_503 non_idempotent;
      proxy_next_upstream_tries 2;
    }}
  }}
}}
"""


@contextlib.contextmanager
def nginx_in_front(tmp_path, upstreams: list[int]):
    """nginx with the README's arrangement in front of `upstreams`, up and answering: its URL."""
    if not os.path.exists(NGINX):
        pytest.fail("nginx is missing: tools/install_deps.sh installs Debian's nginx-light")
    port = free_port()
    (tmp_path / "nginx.conf").write_text(nginx_config(tmp_path, port, upstreams))
    nginx = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                if requests.get(f"{url}/internal/ping", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.time() < deadline and nginx.poll() is None, "nginx did not come up: " + nginx.stderr.read()
            time.sleep(0.1)
        yield url
    finally:
        nginx.send_signal(signal.SIGQUIT)
        try:
            nginx.wait(20)
        except subprocess.TimeoutExpired:
            nginx.kill()


def test_nginx_in_front_of_two_servers_serves_every_request_when_one_dies(start_server, tmp_path):
    first = start_server("--model", str(TINY))
    second = start_server("--model", str(TINY))
    with nginx_in_front(tmp_path, [first.port, second.port]) as url:
        answers, errors = {}, []

        def client(c: int) -> None:
            for r in range(4):
                seed = c * 4 + r
                body = {"prompt": "a red square", "steps": 3, "width": 32, "height": 32, "seed": seed}
                try:
                    answers[seed] = requests.post(f"{url}/sdapi/v1/txt2img", json=body, timeout=600)
                except requests.RequestException as e:
                    errors.append(f"seed {seed}: {e}")

        threads = [threading.Thread(target=client, args=(c,)) for c in range(16)]
        for t in threads:
            t.start()
        deadline = time.time() + 300
        while len(answers) < 12:  # the run under way on both servers
            assert time.time() < deadline and not errors, errors[:3] or "no answers within 300 s"
            time.sleep(0.05)
        first.process.send_signal(signal.SIGKILL)  # dies mid-run, its generations unanswered
        killed_after = len(answers)
        for t in threads:
            t.join()
        assert not errors, errors[:5]
        assert len(answers) == 64 and killed_after < 64
        for seed, answer in answers.items():
            assert answer.status_code == 200, (seed, answer.status_code, answer.text[:300])
            assert picture_seeds(answer.json()) == [seed]
        assert first.process.wait(10) == -signal.SIGKILL
        assert second.process.poll() is None, second.log()


def test_a_client_that_leaves_nginx_gets_its_pictures_cancelled_behind_it(start_server, tmp_path):
    server = start_server("--model", str(TINY))
    with nginx_in_front(tmp_path, [server.port]) as url:
        host, port = url.removeprefix("http://").split(":")
        # nginx closes its connection to the server (proxy_ignore_client_abort is off), and the server
        # cancels. About 15 s of work on one core.
        leave_while_sampling(server, host, int(port), {"prompt": "a red square", "steps": 150, "n_iter": 3,
                                                       "width": 32, "height": 32, "seed": 1})
