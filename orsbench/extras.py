"""Optional dependencies: which extra brings which third-party package.

``pip install orsbench`` alone is enough for ``check`` and ``serve``; the rest
comes with an extra. A front end that needs one calls :func:`require` before
it imports anything heavy, so a missing package is reported as the extra to
install (as httpx does for ``h2``) — and an ``ImportError`` raised inside
orsbench's own modules is never mistaken for one.
"""

from __future__ import annotations

import importlib.util

#: extra → the importable top-level modules it provides (what :func:`require` looks for).
EXTRAS: dict[str, tuple[str, ...]] = {
    "sdk": ("openreward", "fastapi"),
    "load": ("locust", "aiohttp"),
    "training": ("trl", "torch"),
    "ors-sdk": ("ors",),
    "inspect": ("inspect_ai",),
    "firehorse": ("firehorse", "anthropic"),
}


class MissingExtra(ImportError):
    """A feature needs a package that is not installed; the message names the extra that brings it."""

    def __init__(self, extra: str, missing: str, feature: str) -> None:
        self.extra, self.missing, self.feature = extra, missing, feature
        super().__init__(
            f'{feature} needs the {missing!r} package, which is not installed: pip install "orsbench[{extra}]"',
            name=missing,
        )


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found on the path, without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module half-initialised
        return False


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` unless every package of ``extra`` is importable."""
    for module in EXTRAS[extra]:
        if not installed(module):
            raise MissingExtra(extra, module, feature)
