"""Wire checks that mostly wait, run in a process of their own from the start of the run.

The wire checks of the ``slow`` scenario spend ~40 s on its slow tool (keep-alive spacing, a held stream)
and ~2 s of CPU. Run by the worker their group reached first, that worker did nothing else for those 40 s,
while the other played a client batch on about one and a half of the two cores. So the session's first
process (the xdist controller; the only process without ``-n``) starts them at once, one process per
scenario: ``python -m conformance.background SCENARIO REPORT`` serves the scenario on the mock engine (as
the plugin's ``ors_server_factory`` would), runs the same :func:`~orsbench.checks.run_checks` the wire tests
run in-process, and writes the report's JSON (:meth:`~orsbench.checks.Report.to_json`) to ``REPORT``. The
tests grade each check from that report (:func:`read`); their group is handed out last
(:mod:`conformance.scheduling`), long after the report is written, and a test that comes earlier waits for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbench.checks import CheckResult, Options, run_checks
from orsbench.servers.launch import start

#: The config attribute (the first process) and ``workerinput`` key (the workers) naming the reports' folder.
KEY = "orsbench_wire_reports"
#: Scenarios whose wire checks are run here, not by a worker (``test_wire_checks.EMBEDDED`` names them all).
BACKGROUND = ("slow",)
#: Seconds a test waits for a report at most (the run takes ~40 s alone, longer on a busy machine).
WAIT_S = 300.0


def reports_folder(config: Any) -> str | None:
    """The folder this session's background checks write their reports in (None: they do not run in this session)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get(KEY) if workerinput is not None else getattr(config, KEY, None)


def report_path(directory: str | os.PathLike[str], scenario: str) -> Path:
    return Path(directory) / f"wire-checks-{scenario}.json"


def launch(
    directory: str | os.PathLike[str], root: str | os.PathLike[str], scenarios: tuple[str, ...] = BACKGROUND
) -> list[subprocess.Popen[bytes]]:
    """Start the checks of each scenario (run from ``root``, the repository), each writing its report in ``directory``."""
    processes = []
    for scenario in scenarios:
        report = report_path(directory, scenario)
        log = open(report.with_suffix(".log"), "wb")  # noqa: SIM115 - the child holds it; read() quotes its tail
        argv = [sys.executable, "-m", "conformance.background", scenario, str(report)]
        with log:
            processes.append(subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
    return processes


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """End the checks still running (a run cut short): SIGTERM lets each stop its server by PID first."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@dataclass(frozen=True)
class ReadReport:
    """A report of :func:`main`'s, read back: what a wire test grades (``reason`` and each check's result)."""

    reason: str | None
    results: dict[str, CheckResult]

    def result(self, check_id: str) -> CheckResult:
        return self.results[check_id]


def read(path: str | os.PathLike[str], timeout: float = WAIT_S) -> ReadReport:
    """The report at ``path``, waited for up to ``timeout`` seconds (it is written whole, by a rename)."""
    path = Path(path)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            log = path.with_suffix(".log")
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            return ReadReport(f"no wire-check report at {path} after {timeout:g} s; its log ends:\n{tail}", {})
        time.sleep(0.2)
    data = json.loads(path.read_text())
    return ReadReport(data.get("reason"), {entry["id"]: CheckResult.from_json(entry) for entry in data.get("checks", [])})


def main(argv: list[str]) -> int:
    """``SCENARIO REPORT``: serve the scenario, check it, write the report's JSON to ``REPORT`` (whole, by a rename)."""
    scenario, out = argv
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwinds: the server is stopped by PID
    server = None
    try:
        server = start(scenario)
        data = run_checks(server.url, Options(env=server.env_name)).to_json()
    except Exception:  # noqa: BLE001 - the tests read why
        data = {"reason": f"the wire checks of {scenario} could not run:\n{traceback.format_exc()}", "checks": []}
    finally:
        if server is not None:
            server.stop()
    part = out + ".part"
    Path(part).write_text(json.dumps(data))
    os.replace(part, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
