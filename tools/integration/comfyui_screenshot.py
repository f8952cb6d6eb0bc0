#!/usr/bin/env python3
"""A screenshot of ComfyUI's graph with hipDiffusion's nodes in it (docs/comfyui-nodes.png).

Starts ComfyUI (a checkout given; its web front end from its requirements) on the CPU with the node
package linked in, opens it in headless Chromium, loads the engine workflow of comfyui_run.py into the
page through ComfyUI's own `app.loadApiJson`, and saves what the browser draws (chromium.py drives it).

Usage: comfyui_screenshot.py --comfyui DIR --python VENV_PYTHON --checkpoint NAME --out PNG
"""
import argparse
import asyncio
import json
import shutil
import tempfile
import urllib.request
from pathlib import Path

from chromium import launch, open_page
from comfyui_run import workflow
from ui_server import free_port, request, start, stop


async def capture(page, graph: dict, out: Path) -> None:
    # The front end is ready when its app object exists and has registered the nodes.
    await page.until("!!(window.app && window.app.graph && window.LiteGraph && "
                     "LiteGraph.registered_node_types['HipDiffusionUNet'])",
                     "ComfyUI's front end with the hipDiffusion nodes registered")
    types = await page.evaluate(f"(async () => {{ await app.loadApiJson({json.dumps(graph)}, 'hipdiffusion'); "
                                "app.graph.arrange && app.graph.arrange(); "
                                "app.canvas.ds.scale = 0.8; app.canvas.ds.offset = [10, 40]; "
                                "app.graph.setDirtyCanvas(true, true); "
                                "return app.graph._nodes.map(n => n.type); })()") or []
    if "HipDiffusionUNet" not in types or "HipDiffusionVAEDecode" not in types:
        raise SystemExit(f"the workflow did not load with our nodes: {types}")
    for kind in ("keyDown", "keyUp"):  # and any dialog still open is closed
        await page.send("Input.dispatchKeyEvent", type=kind, key="Escape", code="Escape", windowsVirtualKeyCode=27)
    await asyncio.sleep(2)
    await page.screenshot(out)
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
    command = [args.python, "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(port), "--disable-auto-launch",
               "--output-directory", str(work / "output"), "--temp-directory", str(work / "temp"),
               "--input-directory", str(work / "input"), "--database-url", "sqlite:///:memory:"]
    server = browser = None
    log = open(work / "comfyui.log", "w")
    try:
        server = start(command, args.comfyui, log, f"http://127.0.0.1:{port}/system_stats", "ComfyUI", seconds=300)
        request(f"http://127.0.0.1:{port}/object_info/HipDiffusionUNet")
        # A new user's first visit opens a template gallery over the graph: marked as seen.
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/settings/Comfy.TutorialCompleted",
                                                      data=b"true", method="POST"), timeout=30).read()
        browser = launch(args.chromium, debug_port, work / "chromium")
        graph = workflow("engine", args.checkpoint, "hipdiffusion", 512, 20)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        asyncio.run(open_page(debug_port, f"http://127.0.0.1:{port}/", 1600, 900,
                              lambda page: capture(page, graph, args.out)))
    finally:
        for process in (browser, server):
            if process is not None:
                stop(process)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
