"""Helpers for faults that change the mock engine's own answers, through its public seam only.

Everything here goes through :meth:`Engine.wrap_route <orsbench.servers.engine.Engine.wrap_route>`
and :class:`~orsbench.servers.http.Request`'s public methods: a fault wraps a
route handler (rewrite its JSON answer, run a check before it, turn one error
into another answer) and never touches the engine's internals. Faults that can
be told at the HTTP level instead live in :mod:`.middleware`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orsbench import protocol
from orsbench.servers.http import HTTPError, Request, plain

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine

Handler = Callable[..., Awaitable[Any]]
Hook = Callable[[Request, dict[str, Any]], "dict[str, Any] | None | Awaitable[dict[str, Any] | None]"]


def rewrite_result(engine: Engine, route: str, method: str, change: Callable[[Any, Request], Any]) -> None:
    """Replace a route's JSON answer with ``change(answer, request)``."""

    def wrap(handler: Handler) -> Handler:
        async def rewritten(request: Request, *args: Any) -> Any:
            return change(plain(await handler(request, *args)), request)

        return rewritten

    engine.wrap_route(route, method, wrap)


def before(engine: Engine, route: str, method: str, hook: Hook) -> None:
    """Run ``hook(request, body)`` before a route's handler.

    The hook may raise (an ``HTTPError`` is answered, anything else is a 500),
    or return a replacement JSON body for the handler to read; ``None`` leaves
    the request as it is.
    """

    def wrap(handler: Handler) -> Handler:
        async def hooked(request: Request, *args: Any) -> Any:
            replacement = hook(request, await request.json_body())
            if inspect.isawaitable(replacement):
                replacement = await replacement
            if replacement is not None:
                request.replace_body(json.dumps(replacement).encode())
            return await handler(request, *args)

        return hooked

    engine.wrap_route(route, method, wrap)


def rescue(engine: Engine, route: str, method: str, detail: str | None, instead: Callable[[Request, str], Any]) -> None:
    """Where a route answers an ``HTTPError`` (with ``detail``, if given), return or raise ``instead(request, raw_env)``."""

    def wrap(handler: Handler) -> Handler:
        async def rescued(request: Request, *args: Any) -> Any:
            try:
                return await handler(request, *args)
            except HTTPError as exc:
                if detail is not None and exc.detail != detail:
                    raise
                return instead(request, args[-1] if args else "")

        return rescued

    engine.wrap_route(route, method, wrap)


def remember_deleted(engine: Engine) -> dict[str, Any]:
    """Wrap /delete so a fault can tell a deleted sid from one never seen; returns sid → old session."""
    deleted: dict[str, Any] = {}

    def wrap(handler: Handler) -> Handler:
        async def remembering(request: Request) -> Any:
            sid = request.session_id
            if sid in engine.sessions:
                deleted[sid] = engine.sessions[sid]
            return await handler(request)

        return remembering

    engine.wrap_route(protocol.DELETE, "POST", wrap)
    return deleted


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def raise_(exc: BaseException) -> Any:
    """``raise`` as an expression (for lambdas that stand in for a handler)."""
    raise exc
