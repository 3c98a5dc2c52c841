"""Secret values out of any text a report shows: as written, JSON-escaped, HTML-escaped or base64.

Request headers that carry secrets are masked by name where an exchange is
summarised (:meth:`~orsbench.wire.evidence.Exchange.summary`); this is the
second line, for a value that turns up elsewhere — a server that echoes the
key in an error body, a check message quoting that body.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

from markupsafe import escape

REDACTED = "[redacted]"
#: Secrets shorter than this are not scrubbed (replacing "a" everywhere would wreck the text).
MIN_SECRET = 4


def forms(secret: str) -> set[str]:
    """The ways ``secret`` can appear in a report's text."""
    return {secret, json.dumps(secret)[1:-1], str(escape(secret)), base64.b64encode(secret.encode()).decode()}


def scrub(text: str, secrets: Iterable[str | None], replacement: str = REDACTED) -> str:
    """``text`` with every form of every secret replaced by ``replacement``."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True):
        for form in sorted(forms(secret), key=len, reverse=True):
            text = text.replace(form, replacement)
    return text
