#!/usr/bin/env python3
"""`hipdiffusion serve` under load through its HTTP API, as A1111 clients use it: K clients, each posting a
txt2img and waiting for the answer before the next (closed loop), for K in --clients. Reports images/s and
latency p50/p99 per K; the server's batching (on or off) is the server's own flag, so a comparison runs
this twice against two servers (tools/device/serve_http_bench.sh does).

  serve_http_bench.py --url http://127.0.0.1:7860 [--clients 1,4,16] [--images 32] [--size 512] [--steps 20]
                      [--label on] [--json-out FILE]
"""
import argparse
import json
import statistics
import threading
import time

import requests


class Failed(Exception):
    pass


def post(session: requests.Session, url: str, size: int, steps: int, seed: int) -> float:
    body = {"prompt": "a photograph of an astronaut riding a horse", "negative_prompt": "blurry", "steps": steps,
            "width": size, "height": size, "seed": seed, "cfg_scale": 7, "sampler_name": "Euler"}
    start = time.perf_counter()
    answer = session.post(f"{url}/sdapi/v1/txt2img", json=body, timeout=900)
    if answer.status_code != 200:
        raise Failed(f"txt2img answered {answer.status_code}: {answer.text[:500]}")
    if len(answer.json()["images"]) != 1:
        raise Failed("txt2img answered without its picture")
    return time.perf_counter() - start


def load(url: str, clients: int, images: int, size: int, steps: int) -> dict:
    latencies, errors, lock, next_seed = [], [], threading.Lock(), iter(range(images))

    def client() -> None:
        session = requests.Session()
        while True:
            with lock:
                seed = next(next_seed, None)
            if seed is None:
                return
            try:
                seconds = post(session, url, size, steps, seed)
            except (Failed, requests.RequestException) as e:  # a failed request fails the run, never a row
                with lock:
                    errors.append(f"seed {seed}: {e}")
                return
            with lock:
                latencies.append(seconds)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit(f"{len(errors)} of {images} requests failed, e.g. {errors[0]}")
    latencies.sort()
    return {"clients": clients, "images": len(latencies), "seconds": wall, "images_per_second": len(latencies) / wall,
            "p50_seconds": statistics.median(latencies),
            "p99_seconds": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--label", default="", help="what the server was started with, for the table")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    runs = []
    print("| clients | server | images/s | p50 s | p99 s |\n| --- | --- | --- | --- | --- |")
    for clients in [int(c) for c in args.clients.split(",")]:
        load(args.url, clients, clients, args.size, args.steps)  # warm: this batch shape captured and tuned
        run = load(args.url, clients, max(args.images, clients), args.size, args.steps)
        run["server"] = args.label
        runs.append(run)
        print(f"| {clients} | {args.label} | {run['images_per_second']:.3f} | {run['p50_seconds']:.3f} | "
              f"{run['p99_seconds']:.3f} |", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(runs, f, indent=2)


if __name__ == "__main__":
    main()
