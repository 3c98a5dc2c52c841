"""The GitHub Action's logic (``action.yml`` at the repository root), runnable anywhere.

``action.yml`` only sets up Python, installs orsbench and calls
``python -m orsbench.ci_action``; everything else is here so it can be run
and tested on a laptop with a fake ``GITHUB_STEP_SUMMARY`` / ``GITHUB_OUTPUT``:

1. read the inputs from ``INPUT_*`` variables (``INPUT_URL``, ``INPUT_SERVE``,
   ``INPUT_APP``, ``INPUT_CMD``, ``INPUT_EXPECTED_FAILURES``, ``INPUT_STRICT``,
   ``INPUT_CLIENT_CMD``, ``INPUT_CLIENT_ARGS``, ``INPUT_ARGS``, ``INPUT_OUTPUT_DIR``) — the names
   GitHub itself gives inputs of JavaScript actions, set explicitly by the
   composite action;
2. run ``orsbench check`` on the one target named, writing JSON, JUnit, HTML
   and Markdown into the output folder; with ``client-cmd``, run
   ``orsbench check-client --client-cmd`` too, with the same reports;
3. append the Markdown to ``$GITHUB_STEP_SUMMARY`` and the paths and verdict
   to ``$GITHUB_OUTPUT``;
4. exit with the worst exit code of the runs (0 pass, 1 fail, 2 unreachable or
   usage, 3 orsbench's own error), which fails the job on the verdict.

No secret is passed on a command line: the action has no API-key input, and
``INPUT_ARGS`` is split like a shell would, for flags only.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The inputs that name the server to check (and the ``orsbench check`` flag each becomes); exactly one must be given.
TARGETS = {"url": None, "serve": "--scenario", "app": "--app", "cmd": "--server-cmd"}
USAGE = 2


class UsageError(Exception):
    """The inputs are wrong; the message names the fix."""


@dataclass
class Inputs:
    url: str = ""
    serve: str = ""
    app: str = ""
    cmd: str = ""
    expected_failures: str = ""
    strict: bool = False
    client_cmd: str = ""
    client_args: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    output_dir: Path = Path("orsbench-report")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Inputs:
        env = dict(os.environ if env is None else env)

        def get(name: str) -> str:
            return env.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip()

        strict = get("strict").lower()
        if strict not in ("", "true", "false"):
            raise UsageError(f"input 'strict' must be true or false, got {strict!r}")
        return cls(
            url=get("url"),
            serve=get("serve"),
            app=get("app"),
            cmd=get("cmd"),
            expected_failures=get("expected-failures"),
            strict=strict == "true",
            client_cmd=get("client-cmd"),
            client_args=shlex.split(get("client-args")),
            args=shlex.split(get("args")),
            output_dir=Path(get("output-dir") or "orsbench-report"),
        )

    def target(self) -> list[str]:
        named = [name for name in TARGETS if getattr(self, name)]
        if len(named) > 1 or (not named and not self.client_cmd):
            got = f" (got {', '.join(named)})" if named else ""
            raise UsageError(f"give one of the inputs url, serve, app or cmd (or only client-cmd){got}")
        if not named:
            return []
        flag = TARGETS[named[0]]
        value = getattr(self, named[0])
        return [value] if flag is None else [flag, value]


def _orsbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "orsbench", *args]


def check_command(inputs: Inputs, out: Path) -> list[str]:
    """The ``orsbench check`` command line the action runs."""
    cmd = _orsbench("check", *inputs.target())
    cmd += ["--json", str(out / "report.json"), "--junit", str(out / "junit.xml")]
    cmd += ["--html", str(out / "report.html"), "--markdown", str(out / "summary.md"), "--verbose"]
    if inputs.expected_failures:
        cmd += ["--expected-failures", inputs.expected_failures]
    if inputs.strict:
        cmd.append("--strict")
    return cmd + inputs.args


def client_command(inputs: Inputs, out: Path) -> list[str]:
    """The ``orsbench check-client`` command line (the same report formats as ``check``)."""
    cmd = _orsbench("check-client", "--client-cmd", inputs.client_cmd)
    cmd += ["--json", str(out / "client-report.json"), "--junit", str(out / "client-junit.xml")]
    cmd += ["--html", str(out / "client-report.html"), "--markdown", str(out / "client-summary.md"), "--verbose"]
    return cmd + inputs.client_args


def _docs_url(env: dict[str, str]) -> str | None:
    """Where the orsbench repository the action runs from shows docs/protocol.md (links in the reports)."""
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    repo = env.get("ORSBENCH_ACTION_REPOSITORY") or env.get("GITHUB_REPOSITORY")
    ref = env.get("ORSBENCH_ACTION_REF") or env.get("GITHUB_SHA")
    return f"{server}/{repo}/blob/{ref}" if repo and ref else None


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text)


def _run(cmd: list[str], env: dict[str, str]) -> int:
    print("::group::" + shlex.join(cmd[1:]), flush=True)
    try:
        return subprocess.run(cmd, env=env, check=False).returncode
    finally:
        print("::endgroup::", flush=True)


def main(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    try:
        inputs = Inputs.from_env(env)
        target = inputs.target()
    except UsageError as exc:
        print(f"::error title=orsbench action::{exc}", flush=True)
        return USAGE
    out = inputs.output_dir
    out.mkdir(parents=True, exist_ok=True)
    child_env = {**env, "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1"}
    docs = _docs_url(env)
    if docs and "ORSBENCH_DOCS_URL" not in env:
        child_env["ORSBENCH_DOCS_URL"] = docs
        os.environ["ORSBENCH_DOCS_URL"] = docs  # for the reports rendered in this process
    codes: list[int] = []
    summary = ""
    outputs: dict[str, str] = {"report-dir": str(out)}
    if target:
        code = _run(check_command(inputs, out), child_env)
        codes.append(code)
        markdown = out / "summary.md"
        summary += markdown.read_text(encoding="utf-8") if markdown.is_file() else f"### orsbench check: exit {code}, no report written\n"
        outputs.update(
            {
                "report-json": str(out / "report.json"),
                "junit": str(out / "junit.xml"),
                "html": str(out / "report.html"),
                "markdown": str(markdown),
            }
        )
        report = out / "report.json"
        if report.is_file():
            outputs["verdict"] = json.loads(report.read_text(encoding="utf-8")).get("verdict", "error")
    if inputs.client_cmd:
        code = _run(client_command(inputs, out), child_env)
        codes.append(code)
        markdown = out / "client-summary.md"
        text = markdown.read_text(encoding="utf-8") if markdown.is_file() else f"### orsbench check-client: exit {code}, no report written\n"
        summary += ("\n" if summary else "") + text
        client_report = out / "client-report.json"
        if client_report.is_file():
            outputs["client-verdict"] = json.loads(client_report.read_text(encoding="utf-8")).get("verdict", "error")
        outputs["client-report-json"] = str(client_report)
        outputs["client-html"] = str(out / "client-report.html")
        outputs["client-markdown"] = str(markdown)
    exit_code = max(codes)
    outputs["exit-code"] = str(exit_code)
    outputs.setdefault("verdict", "pass" if exit_code == 0 else "fail")
    _append(env.get("GITHUB_STEP_SUMMARY"), summary)
    _append(env.get("GITHUB_OUTPUT"), "".join(f"{k}={v}\n" for k, v in outputs.items()))
    print(f"orsbench action: exit {exit_code}; reports in {out}/", flush=True)
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
