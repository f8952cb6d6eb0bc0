"""The server's own rules with a real process: authentication on every route, the queue's limit, A1111's
interrupt and skip, a client that leaves (its pictures cancelled), and SIGTERM (the accepted generations
finish and are answered, new ones get 503)."""
import json
import signal
import threading
import time

import requests

from conftest import TINY, leave_while_sampling, picture_seeds

ROUTES = [("GET", "/sdapi/v1/sd-models"), ("GET", "/sdapi/v1/options"), ("GET", "/sdapi/v1/progress"),
          ("GET", "/sdapi/v1/samplers"), ("GET", "/openapi.json"), ("POST", "/sdapi/v1/interrupt"),
          ("POST", "/sdapi/v1/txt2img")]


def generation(steps: int, **more) -> dict:
    return {"prompt": "a red square", "steps": steps, "width": 32, "height": 32, "seed": 1, **more}


def in_background(url: str, body: dict) -> tuple[threading.Thread, dict]:
    """A txt2img posted from a thread of its own: the thread, and a dict that gets its "answer"."""
    result = {}

    def post() -> None:
        result["answer"] = requests.post(f"{url}/sdapi/v1/txt2img", json=body, timeout=300)

    thread = threading.Thread(target=post)
    thread.start()
    return thread, result


def post_all(url: str, bodies: list[dict], stagger: float = 0) -> dict:
    """Each body posted from a thread of its own (started `stagger` seconds apart): answers by index."""
    answers = {}

    def post(i: int) -> None:
        answers[i] = requests.post(f"{url}/sdapi/v1/txt2img", json=bodies[i], timeout=300)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
        time.sleep(stagger)
    for t in threads:
        t.join()
    return answers


def wait_until_sampling(url: str, request: threading.Thread, seconds: float = 120) -> None:
    """Until a picture has taken a step; fails if the request ended first or the time ran out."""
    deadline = time.time() + seconds
    while requests.get(f"{url}/sdapi/v1/progress").json()["state"]["sampling_step"] < 1:
        assert request.is_alive(), "the request ended before any step was seen"
        assert time.time() < deadline, "no step within the time"
        time.sleep(0.01)


def test_with_api_auth_every_route_needs_the_credentials(start_server):
    server = start_server("--model", str(TINY), "--api-auth", "alice:s3cret,bob:pa:ss")
    for method, route in ROUTES:
        body = generation(1) if route.endswith("txt2img") else None
        anonymous = requests.request(method, server.url + route, json=body)
        assert anonymous.status_code == 401, route
        assert anonymous.headers["WWW-Authenticate"].startswith("Basic")
        wrong = requests.request(method, server.url + route, json=body, auth=("alice", "s3cre"))
        assert wrong.status_code == 401, route
        right = requests.request(method, server.url + route, json=body, auth=("bob", "pa:ss"))
        assert right.status_code == 200, (route, right.text)


def test_bodies_must_say_their_length_and_come_plain(start_server):
    import http.client

    server = start_server("--model", str(TINY))

    def raw(headers: dict, body: bytes = b"") -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.putrequest("POST", "/sdapi/v1/txt2img", skip_accept_encoding=True)
        for k, v in headers.items():
            connection.putheader(k, v)
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, answer.read().decode()

    assert raw({"Content-Type": "application/json"}, b"")[0] == 411  # no Content-Length
    status, text = raw({"Transfer-Encoding": "chunked"}, b"2\r\n{}\r\n0\r\n\r\n")
    assert status == 411 and "Content-Length" in text
    status, text = raw({"Content-Encoding": "gzip", "Content-Length": "4"}, b"\x1f\x8b\x08\x00")
    assert status == 415 and "compressed" in text
    deep = '{"comments": ' + "[" * 5000 + "]" * 5000 + "}"
    nested = requests.post(f"{server.url}/sdapi/v1/txt2img", data=deep, headers={"Content-Type": "application/json"})
    assert nested.status_code == 422 and "nested more than 32 deep" in nested.json()["detail"]
    assert requests.post(f"{server.url}/sdapi/v1/interrupt").status_code == 200  # requests says Content-Length: 0
    assert server.process.poll() is None, server.log()


def test_a_bad_api_auth_keep_models_or_model_memory_is_a_start_error(start_server):
    from conftest import CLI
    import subprocess

    run = subprocess.run([str(CLI), "serve", "--model", str(TINY), "--api-auth", "alice"], capture_output=True, text=True)
    assert run.returncode == 1 and "user:password" in run.stderr
    for keep in ("0", "65", "two"):
        run = subprocess.run([str(CLI), "serve", "--model", str(TINY), "--keep-models", keep], capture_output=True,
                             text=True)
        assert run.returncode == 1 and "--keep-models" in run.stderr, run.stderr
    for memory in ("0", "-2", "nan", "1e9", "lots"):
        run = subprocess.run([str(CLI), "serve", "--model", str(TINY), "--model-memory", memory], capture_output=True,
                             text=True)
        assert run.returncode == 1 and "--model-memory" in run.stderr, run.stderr


def test_devices_serve_one_queue_with_a_worker_each(start_server):
    from conftest import CLI
    import subprocess

    server = start_server("--model", str(TINY), "--devices", "cpu,cpu")
    assert "on cpu,cpu f32, a worker each" in server.log()
    answers = post_all(server.url, [generation(3, seed=i) for i in range(4)])
    for i, a in answers.items():
        assert a.status_code == 200, a.text
        assert picture_seeds(a.json()) == [i]  # its own picture
    both = subprocess.run([str(CLI), "serve", "--model", str(TINY), "--device", "cpu", "--devices", "cpu,cpu"],
                          capture_output=True, text=True)
    assert both.returncode == 1 and "--device and --devices" in both.stderr


def test_a_full_queue_answers_503_and_loses_nothing(start_server):
    server = start_server("--model", str(TINY), "--max-queue", "1", "--no-batching")
    answers = post_all(server.url, [generation(8, seed=i) for i in range(6)], stagger=0.05)
    codes = sorted(a.status_code for a in answers.values())
    assert 503 in codes and 200 in codes, codes
    for i, a in answers.items():
        if a.status_code == 503:
            assert "queue is full" in a.json()["detail"] and a.headers["Retry-After"] == "5"
        else:
            assert picture_seeds(a.json()) == [i]  # its own picture


def test_interrupt_stops_the_requests_in_progress_and_skip_one_picture(start_server):
    server = start_server("--model", str(TINY))
    t, result = in_background(server.url, generation(150, n_iter=3))
    wait_until_sampling(server.url, t)
    progress = requests.get(f"{server.url}/sdapi/v1/progress").json()
    assert 0 < progress["progress"] < 1 and progress["state"]["job_count"] == 3
    assert requests.post(f"{server.url}/sdapi/v1/interrupt").status_code == 200
    t.join(120)
    answer = result["answer"]
    assert answer.status_code == 200, answer.text
    info = json.loads(answer.json()["info"])
    assert info["interrupted"] is True and len(answer.json()["images"]) < 3
    # skip: the picture being made is left out, the request's others are made.
    t, result = in_background(server.url, generation(150, n_iter=2))
    wait_until_sampling(server.url, t)
    requests.post(f"{server.url}/sdapi/v1/skip")
    t.join(300)
    assert result["answer"].status_code == 200
    assert len(result["answer"].json()["images"]) == 1
    assert requests.get(f"{server.url}/sdapi/v1/progress").json()["state"]["job_count"] == 0


def test_a_client_that_closes_its_connection_gets_nothing_more_made(start_server):
    server = start_server("--model", str(TINY))
    leave_while_sampling(server, "127.0.0.1", server.port, generation(150, n_iter=3))  # 15 s of work on one core
    answer = requests.post(f"{server.url}/sdapi/v1/txt2img", json=generation(2), timeout=120)
    assert answer.status_code == 200 and picture_seeds(answer.json()) == [1]


def test_sigterm_answers_the_accepted_generations_and_refuses_new_ones(start_server):
    server = start_server("--model", str(TINY))
    t, result = in_background(server.url, generation(30, n_iter=2))
    wait_until_sampling(server.url, t)
    server.process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        late = requests.post(f"{server.url}/sdapi/v1/txt2img", json=generation(1), timeout=60)
        assert late.status_code == 503 and "stopping" in late.json()["detail"]
    except requests.ConnectionError:
        pass  # or the server had already closed its socket: refused either way
    t.join(300)
    assert result["answer"].status_code == 200
    assert len(result["answer"].json()["images"]) == 2
    assert server.process.wait(120) == 0
    assert "SIGTERM: finishing the accepted generations" in server.log()
