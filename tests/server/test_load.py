"""32 concurrent clients against one server process, some of them giving up mid-request (their connection
closed under the server) and some interrupting: every request that stayed is answered once, with its own
pictures; none is lost; nothing is left queued; the process's memory does not grow with the load."""
import json
import random
import threading
import time

import requests

from conftest import TINY, picture_seeds, send_txt2img_unread

CLIENTS = 32
ROUNDS = 3


def body(seed: int) -> dict:
    return {"prompt": "a red square", "negative_prompt": "blurry", "steps": 2, "width": 32, "height": 32,
            "seed": seed, "sampler_name": "Euler a"}


def abandon(url: str, seed: int) -> None:
    """Sends a whole request, then closes the connection without reading the answer."""
    host, port = url.removeprefix("http://").split(":")
    with send_txt2img_unread(host, int(port), body(seed)):
        time.sleep(random.uniform(0, 0.2))


def run_clients(url: str, first_seed: int, answers: dict, errors: list) -> None:
    def client(c: int) -> None:
        rng = random.Random(c)
        session = requests.Session()
        for r in range(ROUNDS):
            seed = first_seed + c * ROUNDS + r
            if rng.random() < 0.15:
                abandon(url, seed)
                continue
            try:
                answers[seed] = session.post(f"{url}/sdapi/v1/txt2img", json=body(seed), timeout=600)
            except requests.RequestException as e:  # a lost answer
                errors.append(f"seed {seed}: {e}")

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    interrupter_rng = random.Random(99)
    interrupts = 0
    while any(t.is_alive() for t in threads):
        time.sleep(interrupter_rng.uniform(0.5, 2.0))
        if interrupts < 2:
            requests.post(f"{url}/sdapi/v1/interrupt")
            interrupts += 1
    for t in threads:
        t.join()


def test_32_clients_with_cancellations_and_disconnects(start_server):
    server = start_server("--model", str(TINY), "--max-queue", "256")
    url = server.url
    # Warm: the model loaded, every batch shape once, the allocator's pools filled.
    warm_answers, warm_errors = {}, []
    run_clients(url, 0, warm_answers, warm_errors)
    rss_before = server.rss_kib()

    answers, errors = {}, []
    run_clients(url, 10_000, answers, errors)
    assert not errors, errors[:5]
    assert len(answers) > CLIENTS  # most requests stayed
    for seed, answer in answers.items():
        assert answer.status_code == 200, (seed, answer.text)
        info = json.loads(answer.json()["info"])
        # Its own picture (the PNG says which seed made it), or none when an interrupt stopped it.
        assert picture_seeds(answer.json()) == ([] if info["interrupted"] else [seed])
    # Nothing left behind: no job queued or running once every client has gone.
    deadline = time.time() + 60
    while requests.get(f"{url}/sdapi/v1/progress").json()["state"]["job_count"] and time.time() < deadline:
        time.sleep(0.1)
    assert requests.get(f"{url}/sdapi/v1/progress").json()["state"]["job_count"] == 0
    rss_after = server.rss_kib()
    # Flat: a second load of the same size leaves the process within 10% (or 16 MiB) of the first's size.
    assert rss_after <= max(rss_before * 1.10, rss_before + 16 * 1024), (rss_before, rss_after)
    assert server.process.poll() is None, server.log()
