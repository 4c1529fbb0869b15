"""Screenshot TensorBoard's CUSTOM SCALARS tab of a run, as a user's browser shows it.

    python scripts/screenshot-tensorboard.py RUN_DIR OUT.png

Starts TensorBoard on the run, opens the tab in headless Chromium (Debian's
``chromium`` package; ``--chromium`` names another), turns on the log axis of the
noise-scale chart (what its log-scale button does) and saves the page. Chromium is driven
through its DevTools protocol over aiohttp's websocket client (aiohttp comes with Ray).
Used for the picture in docs/tensorboard.md; not part of the package.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp

# Polymer components keep their buttons in shadow roots: search through them.
CLICK_LOG_AXIS = """
(() => {
  const cards = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.tagName.toLowerCase() === 'tf-custom-scalar-multi-line-chart-card') cards.push(el);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  const noise = cards.filter((card) => (card.title || '').includes('noise scales'));
  noise.forEach((card) => {
    card._toggleLogScale();  // what the card's log-scale button calls
    card._matchesListOpened = true;  // its legend: which line is which tag
  });
  return JSON.stringify({cards: cards.length, log_axis: noise.length});
})()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 60.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


async def shoot(debug_port: int, url: str, out: Path, width: int, height: int) -> str:
    targets = json.loads(wait_for(f"http://127.0.0.1:{debug_port}/json"))
    page = next(t for t in targets if t["type"] == "page")
    async with aiohttp.ClientSession() as session, session.ws_connect(page["webSocketDebuggerUrl"],
                                                                      max_msg_size=0) as ws:
        ids = iter(range(1, 10_000))

        async def call(method: str, **params) -> dict:
            msg_id = next(ids)
            await ws.send_json({"id": msg_id, "method": method, "params": params})
            async for msg in ws:
                data = json.loads(msg.data)
                if data.get("id") == msg_id:
                    return data.get("result", {})
            raise RuntimeError("the browser closed the connection")

        await call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                   mobile=False)
        await call("Page.navigate", url=url)
        await asyncio.sleep(12)  # TensorBoard loads its plugins, then the charts fetch their data
        clicked = await call("Runtime.evaluate", expression=CLICK_LOG_AXIS, returnByValue=True)
        await asyncio.sleep(3)
        shot = await call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))
        return clicked.get("result", {}).get("value", "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=1150)
    p.add_argument("--load-seconds", type=float, default=45.0, help="time TensorBoard gets to read the run")
    args = p.parse_args()
    if not list(args.run_dir.glob("events.out.tfevents.*")):
        print(f"{args.run_dir} holds no TensorBoard events", file=sys.stderr)
        return 2
    tb_port, debug_port = free_port(), free_port()
    tensorboard = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir_spec", f"{args.run_dir.resolve().name}:{args.run_dir}",
                                    "--port", str(tb_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen([args.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                    f"--remote-debugging-port={debug_port}", f"--user-data-dir={profile}",
                                    "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(f"http://127.0.0.1:{tb_port}/")
            time.sleep(args.load_seconds)  # TensorBoard reads the event files in the background first
            clicked = asyncio.run(shoot(debug_port, f"http://127.0.0.1:{tb_port}/#custom_scalars", args.out,
                                        args.width, args.height))
            print(f"{args.out} (log axis: {clicked})")
        finally:
            browser.terminate()
            tensorboard.terminate()
            browser.wait(10)
            tensorboard.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
