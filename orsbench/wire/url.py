"""What a server's base URL must look like, and the fix when it does not.

ORS routes live under one base URL (``/health``, ``/create``, ``/{env}/call``),
normally a server's root: ``scheme://host[:port]``. A base path is allowed
(orsbench's own violation router mounts servers under one), but the commonest
mistake — the environment's name in the path — gets its own hint.
"""

from __future__ import annotations

from urllib.parse import urlsplit


class BadURL(ValueError):
    """The text is not an ORS base URL; the message says what to type instead."""


def base_url(text: str) -> str:
    """``text`` as an ORS base URL (no trailing slash), or :class:`BadURL` naming the fix."""
    raw = text.strip()
    if "://" not in raw:
        raise BadURL(f"{text!r} has no scheme: did you mean http://{raw.lstrip('/')}?")
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise BadURL(f"{text!r}: ORS servers speak http:// or https://, not {parts.scheme}://")
    if not parts.hostname:
        raise BadURL(f"{text!r} has no host: expected http://HOST:PORT")
    try:
        parts.port  # noqa: B018 - raises on an out-of-range or non-numeric port
    except ValueError:
        raise BadURL(f"{text!r} has an invalid port: use 1-65535") from None
    if parts.query or parts.fragment:
        raise BadURL(f"{text!r}: a base URL takes no ?query or #fragment")
    return raw.rstrip("/")


def split_env_path(url: str) -> tuple[str, str] | None:
    """``http://h:p/echo`` → ``("http://h:p", "echo")``: the root and the path's first segment, if any."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    return (f"{parts.scheme}://{parts.netloc}", segments[0]) if segments else None


def env_in_path_hint(url: str, root: str, env: str) -> str:
    """The usage error for an environment name given in the URL's path."""
    return f"{url!r} names environment {env!r} in its path, but ORS routes live at the server's root: use {root} --env {env}"
