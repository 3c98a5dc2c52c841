"""What stands in front of replicas (``orsbench serve --replicas N``): the fronts, the mistakes one can plant, its limits.

One definition of each, read by nginx's configuration (:mod:`orsbench.servers.replicas`), by the built-in
router (:mod:`orsbench.servers.balancer`), by ``serve``'s flags and by the pytest fixture.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The mistakes ``--balancer-fault`` plants, name → what it does (and which ``deployment.*`` check fails).
BALANCER_FAULTS: dict[str, str] = {
    "round-robin": "no session affinity: every request goes to the next replica (deployment.affinity)",
    "idle-timeout": "an idle timeout of 4 s, shorter than the server's 10 s keep-alive interval (deployment.stream_idle_timeout)",
    "buffering": "event streams held until their end, the server's X-Accel-Buffering: no ignored — in nginx with gzip on the "
    "stream too, which is what makes a buffered nginx hold events (deployment.streams_unbuffered)",
    "dead-replica": "a replica that is gone left in the session pool, no retry elsewhere: 502s (deployment.backend_errors)",
    "body-limit": "a 1 MiB request-body limit, nginx's default (deployment.body_size)",
    "html-errors": "4xx answers replaced by the balancer's HTML error page (deployment.front_answers)",
    "gzip-stream": "gzip on text/event-stream (deployment.stream_compression)",
}
#: The idle timeout ``idle-timeout`` plants, and the body limit ``body-limit`` plants.
FAULT_IDLE_TIMEOUT_S = 4.0
FAULT_BODY_LIMIT = 1 << 20
#: The body limit of a correct front (a tool input may be large).
BODY_LIMIT = 64 << 20
#: The page ``html-errors`` answers 4xx with.
ERROR_PAGE = "<!DOCTYPE html>\n<html><head><title>Error</title></head><body><h1>Something went wrong</h1><hr><center>balancer</center></body></html>\n"
#: The 4xx statuses ``html-errors`` replaces.
HTML_ERROR_STATUSES = (400, 404, 405, 409, 413, 422)
#: The fronts ``--balancer`` names: ``auto`` (nginx where installed, else the built-in router), ``nginx``, ``builtin``.
FRONTS = ("auto", "nginx", "builtin")


def check_faults(faults: Sequence[str]) -> None:
    """``ValueError`` naming the known faults for an unknown one."""
    for name in faults:
        if name not in BALANCER_FAULTS:
            raise ValueError(f"unknown balancer fault {name!r}; known: {', '.join(BALANCER_FAULTS)}")
