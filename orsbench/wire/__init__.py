"""The raw wire layer: one strict SSE parser and a client that returns evidence."""

from orsbench.wire.client import WireClient, add_secrets, encode_secrets
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import SSEComment, SSEEvent, SSEParser, SSEStream, parse

__all__ = ["Exchange", "SSEComment", "SSEEvent", "SSEParser", "SSEStream", "WireClient", "add_secrets", "encode_secrets", "parse"]
