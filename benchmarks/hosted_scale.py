"""``check-client --hosted`` at trainer scale: 1,000 client sessions across its cases, and what each costs it.

    python benchmarks/hosted_scale.py                       # 1,000 sessions over 5 cases, 50 at a time
    python benchmarks/hosted_scale.py --sessions 2000 --concurrency 100 --json hosted.json

One hosted run (``orsbench check-client --hosted``, a process of its own, stopped by its PID) serves
five fault-free cases (and one more nobody plays, so the run waits to be stopped). A correct asyncio
client opens ``--sessions`` sessions spread over the five — each opened, its prompt read and its
script's first call made — and keeps them all open at once; then plays the rest of each script and
deletes every session, which the run grades as it ends. The hosted process's resident memory and CPU
time (``/proc``, the whole process tree) are read before, with every session open, and once every
session has been graded: memory per open session, per graded session (its verdicts, and its traffic
while retained), and CPU per session. The run's own report must agree: every session graded, no
client check failing (the client is correct). Bounded: ``--concurrency`` requests at once, every
request under a 60 s timeout, the run under ``--duration``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from orsbench import protocol
from orsbench.bench.procstat import loadavg, tree_cpu_seconds, tree_rss_bytes
from orsbench.clientcheck.hosted import CASES_PATH, REPORT_PATH
from orsbench.servers.launch import start_hosted
from orsbench.wire.sse import parse

PLAYED = ("echo", "task-tool", "sparse-reward", "pick", "schema-zoo")
#: Hosted too, never played: the run does not end by itself, so it can be measured after the grading.
IDLE = "images"
RETRYABLE = (429, 502, 503, 504)


async def _request(http: httpx.AsyncClient, method: str, url: str, sid: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {protocol.SESSION_HEADER: sid} if sid else {}
    for _ in range(6):
        response = await http.request(method, url, headers=headers, **kwargs)
        if response.status_code not in RETRYABLE:
            response.raise_for_status()
            return response
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))
    raise RuntimeError(f"{method} {url}: still {response.status_code}")


async def _open(http: httpx.AsyncClient, case: dict[str, Any]) -> str:
    url = case["url"]
    sid = parse((await _request(http, "POST", url + protocol.CREATE_SESSION)).content).first(protocol.EVENT_TASK_ID).data
    body = {"env_name": case["env"], "split": case["split"], "index": case["index"]}
    await _request(http, "POST", url + protocol.CREATE, sid, json=body)
    await _request(http, "GET", url + protocol.env_path(case["env"], protocol.PROMPT), sid)
    await _call(http, case, sid, case["script"]["calls"][0])
    return sid


async def _call(http: httpx.AsyncClient, case: dict[str, Any], sid: str, call: dict[str, Any]) -> None:
    await _request(http, "POST", case["url"] + protocol.env_path(case["env"], protocol.CALL), sid, json={"name": call["tool"], "input": call["input"]})


async def _finish(http: httpx.AsyncClient, case: dict[str, Any], sid: str) -> None:
    for call in case["script"]["calls"][1:]:
        await _call(http, case, sid, call)
    await _request(http, "POST", case["url"] + protocol.DELETE, sid)


async def _bounded(concurrency: int, jobs: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(job) for job in jobs))


def run(sessions: int, concurrency: int, duration: float) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": sessions, "concurrency": concurrency, "cases": list(PLAYED), "loadavg_before": loadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp, "hosted.json")
        server = start_hosted([*PLAYED, IDLE], deadline=duration, duration=duration, json_report=report_path)
        try:
            manifest = {c["case"]: c for c in httpx.get(server.url + CASES_PATH, timeout=30).json()}
            cases = [manifest[name] for name in PLAYED]
            time.sleep(1.0)
            readings = {"before": _read(server.pid)}

            async def play() -> None:
                limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
                async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
                    plan = [cases[i % len(cases)] for i in range(sessions)]
                    began = time.monotonic()
                    sids = await _bounded(concurrency, [_open(http, case) for case in plan])
                    out["open_s"] = round(time.monotonic() - began, 2)
                    readings["open"] = _read(server.pid)
                    began = time.monotonic()
                    await _bounded(concurrency, [_finish(http, case, sid) for case, sid in zip(plan, sids)])
                    out["finish_s"] = round(time.monotonic() - began, 2)

            asyncio.run(play())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # every session graded (the live report counts them)
                live = httpx.get(server.url + REPORT_PATH, timeout=60).json()
                deleted = [c for c in live["checks"] if c["id"].startswith("client.session_deleted[")]
                if sum(c["measured"].get("sessions", 0) for c in deleted) >= sessions:
                    break
                time.sleep(0.5)
            readings["graded"] = _read(server.pid)
        finally:
            server.process.send_signal(signal.SIGTERM)  # writes the report
            try:
                code: int | None = server.process.wait(60)
            except subprocess.TimeoutExpired:
                server.stop()  # by its PID, killed if need be
                code = None
        report = json.loads(report_path.read_text())
    deleted = [c for c in report["checks"] if c["id"].startswith("client.session_deleted[")]
    out["report"] = {
        "per_check": {c["id"]: c["measured"].get("sessions") for c in report["checks"]},
        "exit_code": code,
        "sessions_graded": sum(c["measured"].get("sessions", 0) for c in deleted),
        # Sessions some check that judged others of its case gave no verdict, per check, and why (hosted counts them).
        "ungraded": {c["id"]: c["measured"]["not_judged_why"] for c in report["checks"] if c["measured"].get("not_judged")},
        "failing": [c["id"] for c in report["checks"] if c["status"] in ("fail", "error")],
    }
    before, opened, graded = readings["before"], readings["open"], readings["graded"]
    out["rss_kib"] = {phase: r["rss_kib"] for phase, r in readings.items()}
    out["kib_per_open_session"] = round((opened["rss_kib"] - before["rss_kib"]) / sessions, 2)
    out["kib_per_graded_session"] = round((graded["rss_kib"] - before["rss_kib"]) / sessions, 2)
    out["cpu_us_per_session"] = round((graded["cpu_s"] - before["cpu_s"]) / sessions * 1e6, 1)
    out["loadavg_after"] = loadavg()
    return out


def _read(pid: int) -> dict[str, float]:
    return {"rss_kib": (tree_rss_bytes(pid) or 0) // 1024, "cpu_s": tree_cpu_seconds(pid) or 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000, help="sessions in all, spread over the cases (default 1,000)")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight at once (default 50)")
    parser.add_argument("--duration", type=float, default=600.0, help="bound of the hosted run, seconds (default 600)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if args.sessions < 1 or args.concurrency < 1:
        parser.error("--sessions and --concurrency must be at least 1")
    out = run(args.sessions, args.concurrency, args.duration)
    r = out["report"]
    print(f"load average before {out['loadavg_before']}, after {out['loadavg_after']}")
    print(f"{args.sessions} sessions over {len(PLAYED)} cases, {args.concurrency} requests at once: opened in {out['open_s']} s, played out in {out['finish_s']} s")
    print(f"RSS KiB: before {out['rss_kib']['before']}, all open {out['rss_kib']['open']}, all graded {out['rss_kib']['graded']}")
    print(f"per session: {out['kib_per_open_session']} KiB open, {out['kib_per_graded_session']} KiB once graded, {out['cpu_us_per_session']} µs CPU")
    print(f"the run's report: {r['sessions_graded']} sessions graded, failing {r['failing'] or 'none'}, exit {r['exit_code']}")
    print(f"sessions a check did not judge: {r['ungraded'] or 'none (every check judged every session it judges anywhere)'}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if r["sessions_graded"] == args.sessions and not r["failing"] and not r["ungraded"] else 1


if __name__ == "__main__":
    sys.exit(main())
