"""A real headless browser for the HTML reports: Debian's ``chromium``, driven over the DevTools protocol.

Only the system binary is used (never a browser download). One page is
opened from ``file://``; the helper collects every console message, uncaught
exception and log entry the page produced, the navigation timing (load event
end, from the Performance API) and, when asked, a full-page screenshot and
the rendered DOM facts a test asserts on.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    url: str
    #: Milliseconds from navigation start to the end of the load event (Performance API).
    load_ms: float
    #: Seconds from Page.navigate until Page.loadEventFired, seen from outside.
    wall_s: float
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    facts: Any = None


class Chromium:
    """One headless chromium with a DevTools page; use as a context manager."""

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 1000) -> None:
        binary = binary or find_chromium()
        if binary is None:
            raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="orsbench-chromium-")
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.width = width
        port = self._port()
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=10)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)

    def _port(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if match:
                return int(match.group(1))
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command; events that arrive meanwhile are kept."""
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def _wait_for(self, method: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))

    def load(self, path: Path, facts_js: str | None = None) -> PageLoad:
        """Open ``path`` from file://, wait for its load event; console output and errors included."""
        self.events.clear()
        url = path.resolve().as_uri()
        start = time.monotonic()
        self.call("Page.navigate", url=url)
        self._wait_for("Page.loadEventFired")
        wall = time.monotonic() - start
        timing = self.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        facts = self.evaluate(facts_js) if facts_js else None
        console, errors = [], []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                (errors if params.get("type") in ("error", "assert") else console).append(text)
            elif method == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                errors.append(f"{params['entry'].get('source')}: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return PageLoad(url, float(timing or 0.0), wall, console, errors, facts)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, out: Path, *, height: int | None = None) -> Path:
        """A PNG of the page, ``height`` CSS pixels tall (default: the whole page)."""
        full = int(self.evaluate("document.documentElement.scrollHeight"))
        height = min(full, height) if height else full
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=height, deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png", clip={"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1})
        out.write_bytes(base64.b64decode(data["data"]))
        self.call("Emulation.clearDeviceMetricsOverride")
        return out

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Facts about a check report as rendered (what the tests assert on).
CHECK_FACTS = """(() => {
  const open = [...document.querySelectorAll('details.check[open]')];
  const closed = [...document.querySelectorAll('details.check:not([open])')];
  const shown = (el) => el && el.getClientRects().length > 0;
  return {
    verdict: document.getElementById('verdict')?.textContent,
    open: open.map(d => ({id: d.id, label: d.querySelector('.tag')?.textContent,
                          exchange: shown(d.querySelector('.exchange')),
                          reproducer: shown(d.querySelector('pre.reproducer')),
                          reproducer_text: d.querySelector('pre.reproducer')?.textContent || ''})),
    folded_passes: closed.filter(d => d.querySelector('.tag')?.textContent === 'PASS').length,
    open_passes: open.filter(d => d.querySelector('.tag')?.textContent === 'PASS').length,
    external: [...document.querySelectorAll('script[src],link[href],img[src],iframe')].map(e => e.outerHTML),
  };
})()"""

