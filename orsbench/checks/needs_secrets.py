"""An environment that cannot open a session without secrets: say so, do not grade it.

An env whose ``/create`` (or the ``setup()`` behind it) needs an API key fails
every session probe when none is sent. Graded, that reads as forty protocol
failures with the advice "answer /create with 200" — wrong: the server is fine,
the run lacked a secret. So when a session's first answer is an error whose
text speaks of a secret, the checker stops with a usage error (exit 2) that
quotes the environment's own message and names the flags that send secrets
(``docs/protocol.md`` §14). The values the run sent are scrubbed from the
quote, in case the environment echoes what it got.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from orsbench.wire.evidence import Exchange

#: Words an error about a missing secret uses ("secret", "X-Secrets", "API key", "credentials").
_SECRET_WORDS = re.compile(r"secret|api[ _-]?key|credential", re.IGNORECASE)
#: The longest piece of the environment's message quoted back.
QUOTE_CHARS = 300


def error_text(exchange: Exchange) -> str:
    """An error answer's message: the JSON ``detail``/``error``/``message`` if there is one, else the body text."""
    try:
        body = json.loads(exchange.body)
    except ValueError:
        return exchange.body.decode("utf-8", "replace").strip()
    if isinstance(body, dict):
        for key in ("detail", "error", "message"):
            if key in body:
                value = body[key]
                return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(body, ensure_ascii=False)


def missing_secrets(exchange: Exchange, what: str, sent: Mapping[str, str]) -> str | None:
    """The usage error when ``exchange`` (a session's ``/create`` or first read) failed for want of a secret."""
    if exchange.status is None or exchange.status < 400:
        return None
    message = error_text(exchange)
    if not _SECRET_WORDS.search(message):
        return None
    for value in sorted(sent.values(), key=len, reverse=True):
        if value:
            message = message.replace(value, "[redacted]")
    if len(message) > QUOTE_CHARS:
        message = message[:QUOTE_CHARS] + "…"
    given = (
        f"; the secrets sent ({', '.join(sorted(sent))}) were not the ones it needs" if sent else ""
    )
    return (
        f"the environment cannot open a session without secrets: {what} answered {exchange.status}: {message!r}{given}. "
        "Pass them with --secret NAME=VALUE (or NAME, read from the environment) or --secrets-file FILE; "
        "they are sent as X-Secrets on /create and never reported (docs/protocol.md §14)"
    )
