"""Headless Chromium for the UI screenshots, driven through its DevTools protocol over aiohttp's
WebSocket client (aiohttp is one of ComfyUI's requirements; A1111's pins lack it, so its screenshot
script runs on a Python that has it, e.g. build/venv-comfyui's, while A1111 itself runs on its own)."""
import asyncio
import base64
import json
import subprocess
import time
import urllib.request
from pathlib import Path


def wait_for(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


def launch(chromium: str, debug_port: int, profile: Path) -> subprocess.Popen:
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", f"--remote-debugging-port={debug_port}",
         f"--user-data-dir={profile}", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{debug_port}/json/version", 60)
    except BaseException:  # the caller gets no handle on a browser that never answered: ended here
        browser.kill()
        browser.wait()
        raise
    return browser


class Page:
    """The browser's first page: send(method, **params) -> result; evaluate(js) -> value; until(js)."""

    def __init__(self, ws):
        self.ws, self.counter = ws, 0

    async def send(self, method: str, **params) -> dict:
        self.counter += 1
        await self.ws.send_json({"id": self.counter, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json()
            if message.get("id") == self.counter:
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        return result.get("result", {}).get("value")

    async def until(self, expression: str, what: str, seconds: float = 60) -> None:
        for _ in range(int(seconds * 2)):
            if await self.evaluate(expression):
                return
            await asyncio.sleep(0.5)
        raise SystemExit(f"the page did not come up: {what}")

    async def screenshot(self, out: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))


async def open_page(debug_port: int, url: str, width: int, height: int, use) -> None:
    """Opens `url` at width x height and awaits use(page)."""
    import aiohttp

    targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json").read())
    target = next(t for t in targets if t.get("type") == "page")
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            page = Page(ws)
            await page.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                            mobile=False)
            await page.send("Page.enable")
            await page.send("Page.navigate", url=url)
            await use(page)
