#!/usr/bin/env python3
"""A screenshot of AUTOMATIC1111's settings with hipDiffusion's options selected (docs/a1111-settings.png).

Starts A1111's web UI (a checkout given) on the CPU with a data folder of its own that the extension is
linked into, selects "hipDiffusion" as the cross-attention optimization and as the SD Unet through A1111's
API (its own change handlers run), opens the page in headless Chromium (chromium.py), goes to Settings >
Optimizations, opens the cross-attention list and saves what the browser draws.

Usage (with a Python that has aiohttp, e.g. build/venv-comfyui's; --python is A1111's own):
  a1111_screenshot.py --a1111 DIR --python VENV_PYTHON --extension DIR --checkpoint FILE --out PNG
"""
import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from chromium import launch, open_page
from ui_server import free_port, request, start, stop

CLICK = "(() => {{ const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === {label!r}); " \
        "if (b) b.click(); return !!b; }})()"


async def capture(page, out: Path) -> None:
    await page.until(CLICK.format(label="Settings"), "A1111's Settings tab", 180)
    await page.until(CLICK.format(label="Optimizations"), "the Optimizations section", 60)
    await page.until("[...document.querySelectorAll('#settings input')].some(i => i.value === 'hipDiffusion')",
                     "the cross-attention optimization set to hipDiffusion", 60)
    # The dropdown opened (a real click, as the browser's input), so that the picture shows ours beside
    # A1111's own optimizations.
    box = await page.evaluate("(() => { const r = [...document.querySelectorAll('#settings input')]"
                              ".find(i => i.value === 'hipDiffusion').getBoundingClientRect(); "
                              "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        await page.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)
    await page.until("document.querySelectorAll('#settings ul.options li').length > 0",
                     "the cross-attention list opened", 30)
    opened = await page.evaluate("document.querySelectorAll('#settings ul.options li').length")
    await asyncio.sleep(2)  # the list's opening animation
    await page.screenshot(out)
    print(f"{out}: A1111's Settings > Optimizations with hipDiffusion selected ({opened} choices listed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a1111", required=True, type=Path)
    parser.add_argument("--python", required=True)
    parser.add_argument("--extension", required=True, type=Path)
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hd-a1111-shot-"))
    (work / "data" / "extensions").mkdir(parents=True)
    (work / "data" / "extensions" / "hipdiffusion").symlink_to(args.extension.resolve())
    port, debug_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    command = [args.python, "launch.py", "--api", "--port", str(port), "--ckpt", str(args.checkpoint.resolve()),
               "--skip-prepare-environment", "--skip-install", "--skip-version-check", "--skip-python-version-check",
               "--no-download-sd-model", "--data-dir", str(work / "data"), "--use-cpu", "all",
               "--skip-torch-cuda-test", "--no-half", "--precision", "full"]
    server = browser = None
    with open(work / "a1111.log", "w") as log:
        try:
            server = start(command, args.a1111, log, f"{base}/sdapi/v1/options", "A1111")
            request(f"{base}/sdapi/v1/options", {"cross_attention_optimization": "hipDiffusion", "sd_unet": "hipDiffusion"},
                    timeout=600)
            browser = launch(args.chromium, debug_port, work / "chromium")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            asyncio.run(open_page(debug_port, f"{base}/", 1400, 1000, lambda page: capture(page, args.out)))
        except SystemExit:
            print((work / "a1111.log").read_text()[-3000:])
            raise
        finally:
            if browser is not None:
                stop(browser)
            if server is not None:
                stop(server)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
