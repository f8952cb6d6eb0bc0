#!/usr/bin/env python3
"""A screenshot of ComfyUI's graph with hipDiffusion's nodes in it (docs/comfyui-nodes.png).

Starts ComfyUI (a checkout given; its web front end from its requirements) on the CPU with the node
package linked in, opens it in headless Chromium, loads the engine workflow of comfyui_run.py into the
page through ComfyUI's own `app.loadApiJson`, and saves what the browser draws. Chromium is driven
through its DevTools protocol over aiohttp's WebSocket client (aiohttp is one of ComfyUI's own
requirements), so nothing else is installed.

Usage: comfyui_screenshot.py --comfyui DIR --python VENV_PYTHON --checkpoint NAME --out PNG
"""
import argparse
import asyncio
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from comfyui_run import free_port, request, workflow  # noqa: E402


def wait_for(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


async def capture(debug_port: int, page_url: str, graph: dict, out: Path, width: int, height: int) -> None:
    import aiohttp

    targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json").read())
    page = next(t for t in targets if t.get("type") == "page")
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            counter = 0

            async def send(method: str, **params):
                nonlocal counter
                counter += 1
                await ws.send_json({"id": counter, "method": method, "params": params})
                while True:
                    message = await ws.receive_json()
                    if message.get("id") == counter:
                        if "error" in message:
                            raise SystemExit(f"{method}: {message['error']}")
                        return message.get("result", {})

            await send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                       mobile=False)
            await send("Page.enable")
            await send("Page.navigate", url=page_url)
            # The front end is ready when its app object exists and has registered the nodes.
            for _ in range(120):
                ready = await send("Runtime.evaluate", returnByValue=True,
                                   expression="!!(window.app && window.app.graph && "
                                              "window.LiteGraph && LiteGraph.registered_node_types['HipDiffusionUNet'])")
                if ready.get("result", {}).get("value"):
                    break
                await asyncio.sleep(0.5)
            else:
                raise SystemExit("ComfyUI's front end did not come up with the hipDiffusion nodes registered")
            loaded = await send("Runtime.evaluate", awaitPromise=True, returnByValue=True,
                                expression=f"(async () => {{ await app.loadApiJson({json.dumps(graph)}, 'hipdiffusion'); "
                                           "app.graph.arrange && app.graph.arrange(); "
                                           "app.canvas.ds.scale = 0.8; app.canvas.ds.offset = [10, 40]; "
                                           "app.graph.setDirtyCanvas(true, true); "
                                           "return app.graph._nodes.map(n => n.type); })()")
            types = loaded.get("result", {}).get("value") or []
            if "HipDiffusionUNet" not in types or "HipDiffusionVAEDecode" not in types:
                raise SystemExit(f"the workflow did not load with our nodes: {types}")
            for kind in ("keyDown", "keyUp"):  # and any dialog still open is closed
                await send("Input.dispatchKeyEvent", type=kind, key="Escape", code="Escape", windowsVirtualKeyCode=27)
            await asyncio.sleep(2)
            shot = await send("Page.captureScreenshot", format="png")
            out.write_bytes(base64.b64decode(shot["data"]))
            print(f"{out}: ComfyUI's graph with {len(types)} nodes: {', '.join(sorted(set(types)))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comfyui", required=True, type=Path)
    parser.add_argument("--python", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hd-comfyui-shot-"))
    port, debug_port = free_port(), free_port()
    server = subprocess.Popen(
        [args.python, "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(port), "--disable-auto-launch",
         "--output-directory", str(work / "output"), "--temp-directory", str(work / "temp"),
         "--input-directory", str(work / "input"), "--database-url", "sqlite:///:memory:"],
        cwd=args.comfyui, stdout=open(work / "comfyui.log", "w"), stderr=subprocess.STDOUT)
    browser = None
    try:
        wait_for(f"http://127.0.0.1:{port}/system_stats", 300)
        request(f"http://127.0.0.1:{port}/object_info/HipDiffusionUNet")
        # A new user's first visit opens a template gallery over the graph: marked as seen.
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/settings/Comfy.TutorialCompleted",
                                                      data=b"true", method="POST"), timeout=30).read()
        browser = subprocess.Popen(
            [args.chromium, "--headless=new", "--no-sandbox", "--disable-gpu", f"--remote-debugging-port={debug_port}",
             f"--user-data-dir={work / 'chromium'}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(f"http://127.0.0.1:{debug_port}/json/version", 60)
        graph = workflow("engine", args.checkpoint, "hipdiffusion", 512, 20)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        asyncio.run(capture(debug_port, f"http://127.0.0.1:{port}/", graph, args.out, 1600, 900))
    finally:
        for process in (browser, server):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
