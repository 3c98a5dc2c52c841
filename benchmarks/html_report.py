"""How big the HTML reports get and how fast a real browser opens them; the README's screenshots.

    python benchmarks/html_report.py [--runs 5] [--screenshots docs/images]

Pages measured, each written to a temporary folder and opened from file:// in
headless chromium (tests/browser.py, DevTools protocol), ``--runs`` times:

* ``check reward-bool``: ``orsbench check --scenario echo --fault reward-bool``
  with the default fuzz (a real failing run);
* ``matrix predicted``: the full client matrix (every client × server ×
  scenario and fault profile), as ``orsbench matrix --predicted`` gives it;
* ``matrix worst case``: the same grid with every cell carrying the longest
  error text a live run keeps (2,000 characters) and five problems, so the size
  bound holds for a live run too;
* ``check-client no-resume``: ``orsbench check-client`` of every case with a
  client that re-runs a cut call instead of resuming it (``tests/clients/faulty.py
  no-resume``): the case × check grid of a real failing run.

Printed per page: bytes, median and worst load (navigation start to the end
of the load event, Performance API), median wall time of Page.navigate →
loadEventFired seen from outside, and console errors.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orsbench.reports import render_matrix  # noqa: E402
from tests.browser import CHECK_FACTS, Chromium  # noqa: E402


def check_report(folder: Path) -> Path:
    """A real failing run's HTML, written by the CLI itself."""
    out = folder / "check-reward-bool.html"
    subprocess.run(
        [sys.executable, "-m", "orsbench", "check", "--scenario", "echo", "--fault", "reward-bool", "--html", str(out), "-q"],
        check=False,
        capture_output=True,
        timeout=300,
    )
    return out


def client_report(folder: Path) -> Path:
    """A real failing check-client run over every case, written by the CLI itself."""
    out = folder / "check-client-no-resume.html"
    # As a user types it (the page shows the command): `python` is this interpreter, the path relative to the checkout.
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run(
        [sys.executable, "-m", "orsbench", "check-client", "--client-cmd", "python tests/clients/faulty.py no-resume", "--html", str(out), "-q"],
        check=False,
        capture_output=True,
        timeout=900,
        cwd=ROOT,
        env=env,
    )
    return out


def matrix_pages(folder: Path) -> list[tuple[str, Path]]:
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS

    # Every registered client target, installed here or not: what `orsbench matrix --predicted` draws.
    clients, servers = CLIENT_TARGETS.names(), C.servers()
    result = M.predicted(C.plan(clients, servers, None), clients, servers).to_json()
    predicted = folder / "matrix-predicted.html"
    predicted.write_text(render_matrix(result), encoding="utf-8")
    for cell in result["cells"]:
        cell["error"] = ("RuntimeError: the server closed the stream before the end event " * 40)[:2000]
        cell["problems"] = [f"problem {i}: a text the environment never wrote was shown to the model" for i in range(5)]
        cell["elapsed"] = 12.34
    worst = folder / "matrix-worst.html"
    worst.write_text(render_matrix(result), encoding="utf-8")
    return [(f"matrix predicted ({len(result['cells'])} cells)", predicted), (f"matrix worst case ({len(result['cells'])} cells)", worst)]


def screenshots(browser: Chromium, check_page: Path, matrix_page: Path, client_page: Path, out: Path) -> None:
    """The README's picture (the failing check, open), the matrix grid and the check-client grid (its first screen)."""
    browser.load(check_page)
    browser.evaluate("document.getElementById('check-reward-well_formed').scrollIntoView()")
    top = browser.evaluate("document.getElementById('check-reward-well_formed').getBoundingClientRect().top + window.scrollY")
    browser.evaluate("window.scrollTo(0, 0)")
    browser.screenshot(out / "report-summary.png", height=900)
    # The failing check itself: from its summary line down, with exchange and reproducer.
    full = int(browser.evaluate("document.documentElement.scrollHeight"))
    browser.call("Emulation.setDeviceMetricsOverride", width=browser.width, height=full, deviceScaleFactor=1, mobile=False)
    data = browser.call(
        "Page.captureScreenshot",
        format="png",
        clip={"x": 0, "y": max(0, float(top) - 40), "width": browser.width, "height": 1100, "scale": 1},
        captureBeyondViewport=True,
    )
    (out / "report-reward-bool.png").write_bytes(base64.b64decode(data["data"]))
    browser.call("Emulation.clearDeviceMetricsOverride")
    browser.load(matrix_page)
    browser.screenshot(out / "matrix.png", height=1100)
    browser.load(client_page)
    browser.screenshot(out / "check-client.png", height=1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--screenshots", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        check_page = check_report(folder)
        client_page = client_report(folder)
        pages = [("check reward-bool (fuzz on)", check_page), *matrix_pages(folder), ("check-client no-resume", client_page)]
        print(f"{'page':<32} {'bytes':>9} {'load median':>12} {'load worst':>11} {'wall median':>12} {'errors':>7}")
        with Chromium() as browser:
            for name, path in pages:
                loads = [browser.load(path, CHECK_FACTS if name.startswith("check") else None) for _ in range(args.runs)]
                ms = [load.load_ms for load in loads]
                wall = statistics.median(load.wall_s for load in loads)
                errors = sum(len(load.errors) for load in loads)
                print(f"{name:<32} {path.stat().st_size:>9,} {statistics.median(ms):>10.0f}ms {max(ms):>9.0f}ms {wall * 1000:>10.0f}ms {errors:>7}")
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
                screenshots(browser, check_page, pages[1][1], client_page, args.screenshots)
                print(f"screenshots in {args.screenshots}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
