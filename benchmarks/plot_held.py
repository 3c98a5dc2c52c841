"""Plot a held-sessions sweep: memory and CPU per held session against N, one line per server.

    for n in 100 1000 3000 10000; do orsbench bench --sessions $n --hold 10 --json held-$n.json; done
    python benchmarks/plot_held.py held-*.json --out held-sessions.png

Reads the ``--json`` reports of ``orsbench bench --sessions`` and draws two
panels (KiB of server RSS per held session, µs of server CPU per session) on
a log N axis. A server whose run had errors at some N is drawn up to the last
N it held cleanly, with the failure marked.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports of orsbench bench --sessions N --json")
    parser.add_argument("--out", type=Path, default=Path("held-sessions.png"), help="PNG to write (default held-sessions.png)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    held: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    failed: dict[str, list[int]] = defaultdict(list)
    for path in args.reports:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"plot_held: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        if report.get("mode") != "sessions":
            print(f"plot_held: {path} is not an orsbench bench --sessions report", file=sys.stderr)
            return 2
        for name, figures in report["servers"].items():
            n = figures["sessions"]
            clean = figures["errors"] == 0 and figures["sessions_left"] in (0, None)
            if clean and figures["rss_kib_per_session"] is not None:
                held[name].append((n, figures["rss_kib_per_session"], figures["cpu_us_per_session"] or 0.0))
            else:
                failed[name].append(n)
    fig, (mem, cpu) = plt.subplots(1, 2, figsize=(10, 4))
    for name, points in sorted(held.items()):
        points.sort()
        ns = [p[0] for p in points]
        (line,) = mem.plot(ns, [p[1] for p in points], marker="o", label=name)
        cpu.plot(ns, [p[2] for p in points], marker="o", label=name, color=line.get_color())
        for n in failed.get(name, []):
            mem.axvline(n, color=line.get_color(), linestyle=":", alpha=0.6)
            mem.annotate(f"{name} fails", (n, 0), xytext=(3, 5), textcoords="offset points", color=line.get_color(), rotation=90)
    for ax, title, unit in ((mem, "server memory per held session", "KiB (RSS)"), (cpu, "server CPU per session", "µs (user+sys)")):
        ax.set_xscale("log")
        ax.set_xlabel("sessions held at once")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
