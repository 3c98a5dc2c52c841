"""An ORS server written by hand (Starlette, no SDK), as an author porting an environment from another stack would.

Four isolation bugs live in the parts the openreward SDK's ``Server`` owns — session ids, task ids, the idle
clock, the finish latch — so they cannot be written as an ``Environment`` class; this server has each behind
``--bug`` (and none without it, which is how a correct one is checked):

``task-id-counter``  task ids counted per session (``1``, ``2``, ...) in one server-wide result store: a session
                     resuming its ``1`` gets whichever session's ``1`` came last   (``isolation.resume_own_result``)
``racy-ids``         ``/create_session`` reads a counter, awaits the session table's write, writes it back:
                     ids handed out at once repeat                                 (``isolation.concurrent_create_distinct``)
``global-idle-timer`` one idle clock for the server: any request keeps every session alive
                     (``isolation.ttl_per_session``; run with ``--ttl 2``)
``finish-by-sid``    the finish latch is a dict keyed by sid that ``/delete`` forgets to clear: an id created
                     again starts finished                                          (``isolation.recreated_sid_fresh``)

``--lost-status 400`` answers a request for a session it does not hold 400 instead of 404 (a server some authors
write; the deployment checks must still tell such a "not found" from a found session: tests/test_deployment.py).

Run: ``python tests/envs/sessions_handmade_server.py --port 8080 [--bug NAME] [--ttl S] [--lost-status N]`` (``orsbench check
--server-cmd "python tests/envs/sessions_handmade_server.py --port {port} --bug racy-ids"``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

ENV = "arith"
TASKS = [
    {"id": "t0", "question": "What is 2 + 2?", "target": "4"},
    {"id": "t1", "question": "What is 3 + 4?", "target": "7"},
    {"id": "t2", "question": "What is 5 + 6?", "target": "11"},
]
SUBMIT = {
    "name": "submit",
    "description": "Submit your answer; reward 1.0 when it is right.",
    "input_schema": {
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "your answer, a number"}},
        "required": ["answer"],
    },
}
LISTING = {"tools": [SUBMIT], "terminal_tool": None, "supports_score_group": False, "message_block_types": ["text"]}
CHUNK = 4096
ROOT_ROUTES = {"health", "version", "list_environments", "create_session", "create", "ping", "delete", "delete_session"}
KEEP_RESULTS_S = 60.0


class Server:
    def __init__(self, bug: str | None, ttl: float, lost_status: int = 404) -> None:
        self.bug, self.ttl, self.lost_status = bug, ttl, lost_status
        self.sessions: dict[str, dict[str, Any]] = {}
        self.finished: dict[str, bool] = {}  # sid -> its episode finished (the latch)
        self.results: dict[str, tuple[float, str]] = {}  # task id -> (when, result JSON)
        self.counters: dict[str, itertools.count[int]] = {}
        self.next_id = 1
        self.last_activity = time.monotonic()

    # -- helpers -------------------------------------------------------------------------------------
    def sid(self, request: Request) -> str:
        sid = request.headers.get("x-session-id", "")
        if not sid:
            raise _Error(400, "X-Session-ID header is required")
        return sid

    def session(self, request: Request) -> tuple[str, dict[str, Any]]:
        sid = self.sid(request)
        session = self.sessions.get(sid)
        if session is None:
            raise _Error(self.lost_status, "Active environment not found")
        session["seen"] = self.last_activity = time.monotonic()
        return sid, session

    async def reaper(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.ttl / 4))
            now = time.monotonic()
            if self.bug == "global-idle-timer":
                if now - self.last_activity > self.ttl:  # BUG: one clock for every session
                    self.sessions.clear()
                continue
            for sid in [s for s, v in self.sessions.items() if now - v["seen"] > self.ttl]:
                self.forget(sid)

    def forget(self, sid: str) -> None:
        self.sessions.pop(sid, None)
        self.counters.pop(sid, None)
        if self.bug != "finish-by-sid":
            self.finished.pop(sid, None)  # (the bug: this line was forgotten)

    def new_task_id(self, sid: str) -> str:
        if self.bug == "task-id-counter":
            return str(next(self.counters.setdefault(sid, itertools.count(1))))  # BUG: per session, stored server-wide
        return uuid.uuid4().hex

    # -- routes ----------------------------------------------------------------------------------------
    async def create_session(self, request: Request) -> Response:
        if self.bug == "racy-ids":
            number = self.next_id
            await asyncio.sleep(0.05)  # BUG: "saving the session table" between reading and writing the counter
            self.next_id = number + 1
            sid = f"s-{number}"
        else:
            sid = str(uuid.uuid4())
        return _sse(_event("task_id", sid) + _event("end", ""))

    async def create(self, request: Request) -> Response:
        sid = self.sid(request)
        try:
            body = await request.json()
        except ValueError:
            raise _Error(422, "body is not JSON") from None
        if not isinstance(body, dict):
            raise _Error(422, "body must be an object")
        has_spec, has_index = body.get("task_spec") is not None, body.get("split") is not None or body.get("index") is not None
        if has_spec == has_index:
            raise _Error(422, "give exactly one of task_spec or split and index")
        if body.get("env_name") not in (None, ENV) and str(body.get("env_name")).lower() != ENV:
            raise _Error(404, f"unknown environment {body.get('env_name')!r}")
        if sid in self.sessions:
            raise _Error(400, "Session already exists")
        if has_spec:
            task = body["task_spec"]
        else:
            if body.get("split") != "train":
                raise _Error(400, "Invalid split")
            try:
                task = TASKS[int(body.get("index"))]
            except (IndexError, TypeError, ValueError):
                raise _Error(400, "Invalid index") from None
        self.sessions[sid] = {"task": task, "seen": time.monotonic()}
        self.last_activity = time.monotonic()
        return JSONResponse({"sid": sid})

    async def ping(self, request: Request) -> Response:
        self.session(request)
        return JSONResponse({"status": "ok"})

    async def delete(self, request: Request) -> Response:
        sid = self.sid(request)
        self.forget(sid)
        return JSONResponse({"sid": sid})

    async def delete_session(self, request: Request) -> Response:
        return JSONResponse({"sid": self.sid(request)})

    async def prompt(self, request: Request) -> Response:
        _, session = self.session(request)
        return JSONResponse([{"type": "text", "text": f"{session['task']['question']} Answer with the submit tool.", "detail": None}])

    async def messages(self, request: Request) -> Response:
        _, session = self.session(request)
        blocks = [{"type": "text", "text": f"{session['task']['question']} Answer with the submit tool.", "detail": None}]
        return JSONResponse([{"role": "user", "blocks": blocks, "detail": None}])

    async def task_tools(self, request: Request) -> Response:
        self.session(request)
        return JSONResponse(LISTING)

    async def call(self, request: Request) -> Response:
        sid, session = self.session(request)
        try:
            body = await request.json()
        except ValueError:
            raise _Error(422, "body is not JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str) or "input" not in body:
            raise _Error(422, "give name and input")
        if body.get("task_id") is not None:
            kept = self.results.get(str(body["task_id"]))
            if kept is None:
                return _sse(_event("error", "unknown task_id"))
            return _sse(_event("task_id", str(body["task_id"])) + _result(kept[1]))
        task_id = self.new_task_id(sid)
        result = json.dumps(self.run(sid, session, body["name"], body["input"]), separators=(",", ":"))
        self.results[task_id] = (time.monotonic(), result)
        self.results = {k: v for k, v in self.results.items() if time.monotonic() - v[0] < KEEP_RESULTS_S}
        return _sse(_event("task_id", task_id) + _result(result))

    def run(self, sid: str, session: dict[str, Any], name: str, tool_input: Any) -> dict[str, Any]:
        if name != "submit":
            return {"ok": False, "error": f"{name!r} is not a valid tool", "reason": "not_found"}
        if self.finished.get(sid):
            return {
                "ok": False,
                "error": f"{name!r} was not run: the episode has finished, so no further tool calls are accepted.",
                "reason": "episode_finished",
            }
        if not isinstance(tool_input, dict) or not isinstance(tool_input.get("answer"), str):
            return {"ok": False, "error": f"Tool input validation error: answer must be a string, got {tool_input!r}", "reason": "input_validation"}
        correct = tool_input["answer"].strip() == session["task"].get("target")
        self.finished[sid] = True
        block = {"type": "text", "text": "correct" if correct else "wrong", "detail": None}
        return {"ok": True, "output": {"blocks": [block], "metadata": None, "reward": 1.0 if correct else 0.0, "finished": True}}

    # -- discovery and the dataset ---------------------------------------------------------------------
    async def dataset(self, request: Request) -> Response:
        route = request.path_params["route"]
        try:
            body = await request.json()
        except ValueError:
            raise _Error(422, "body is not JSON") from None
        if not isinstance(body, dict) or body.get("split") != "train":
            raise _Error(400, "Invalid split")
        if route == "tasks":
            return JSONResponse({"tasks": TASKS, "env_name": request.path_params["env"]})
        if route == "num_tasks":
            return JSONResponse({"num_tasks": len(TASKS)})
        if route == "task":
            index = body.get("index")
            if not isinstance(index, int) or not -len(TASKS) <= index < len(TASKS):
                raise _Error(400, "Invalid index")
            return JSONResponse({"task": TASKS[index], "env_name": request.path_params["env"]})
        start, stop = body.get("start"), body.get("stop")
        return JSONResponse({"tasks": TASKS[start:stop], "env_name": request.path_params["env"]})


class _Error(Exception):
    def __init__(self, status: int, detail: str) -> None:
        self.status, self.detail = status, detail


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\r\ndata: {data}\r\n\r\n".encode()


def _result(result: str) -> bytes:
    parts = [result[i : i + CHUNK] for i in range(0, len(result), CHUNK)] or [""]
    return b"".join(_event("chunk", p) for p in parts[:-1]) + _event("end", parts[-1])


def _sse(body: bytes) -> Response:
    async def stream() -> AsyncIterator[bytes]:
        yield body

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def build(bug: str | None, ttl: float, lost_status: int = 404) -> Starlette:
    server = Server(bug, ttl, lost_status)

    def handled(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            env = request.path_params.get("env")
            if env is not None and env.lower() != ENV:
                return RedirectResponse(f"/{ENV}{request.url.path}", status_code=308)
            try:
                return await fn(request)
            except _Error as exc:
                return JSONResponse({"detail": exc.detail}, status_code=exc.status)

        return endpoint

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def version(request: Request) -> Response:
        return JSONResponse({"version": "0.1.0", "build_sha": None})

    async def environments(request: Request) -> Response:
        return JSONResponse([ENV])

    async def tools(request: Request) -> Response:
        return JSONResponse(LISTING)

    async def splits(request: Request) -> Response:
        return JSONResponse([{"name": "train", "type": "train"}])

    async def score_group(request: Request) -> Response:
        return JSONResponse({"detail": f"Environment {ENV!r} does not implement score_group"}, status_code=404)

    async def default_env(request: Request) -> Response:
        if request.path_params["rest"].split("/")[0] in ROOT_ROUTES:
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/{ENV}/{request.path_params['rest']}{query}", status_code=308)

    routes = [
        Route("/health", health),
        Route("/version", version),
        Route("/list_environments", environments),
        Route("/create_session", handled(server.create_session), methods=["POST"]),
        Route("/create", handled(server.create), methods=["POST"]),
        Route("/ping", handled(server.ping), methods=["POST"]),
        Route("/delete", handled(server.delete), methods=["POST"]),
        Route("/delete_session", handled(server.delete_session), methods=["POST"]),
        Route("/{env}/tools", handled(tools)),
        Route("/{env}/splits", handled(splits)),
        Route("/{env}/prompt", handled(server.prompt)),
        Route("/{env}/messages", handled(server.messages)),
        Route("/{env}/task_tools", handled(server.task_tools)),
        Route("/{env}/call", handled(server.call), methods=["POST"]),
        Route("/{env}/score_group", handled(score_group), methods=["POST"]),
        Route("/{env}/{route:str}", handled(server.dataset), methods=["POST"]),
        Route("/{rest:path}", default_env, methods=["GET", "POST"]),
    ]

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        reaper = asyncio.create_task(server.reaper())
        yield
        reaper.cancel()

    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bug", choices=("task-id-counter", "racy-ids", "global-idle-timer", "finish-by-sid"))
    parser.add_argument("--ttl", type=float, default=900.0)
    parser.add_argument("--lost-status", type=int, default=404, help="the status of an answer for a session not held")
    args = parser.parse_args()
    uvicorn.run(build(args.bug, args.ttl, args.lost_status), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
