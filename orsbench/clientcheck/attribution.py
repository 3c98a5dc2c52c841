"""Which client session each request belongs to, when many clients talk to one server at once.

``check-client --cmd`` runs one client per case, so everything its case server sees is that
client's. Behind ``orsbench proxy`` and on ``check-client --hosted`` many clients run at once — a
trainer's 64 rollout workers, a GRPO group playing one case — and a flat log mixes them: a
``/create_session`` that session B sends 20 ms after session A's 503 looks exactly like A retrying
too soon. :class:`Attributor` files each request under the client session it belongs to, so each
session is graded on its own traffic, as if it had been the only client:

* a request carrying ``X-Session-ID`` belongs to that session, and a ``/create_session`` to the
  session whose id it handed out;
* a sessionless request (a refused ``/create_session``, a dataset read) waits on its connection
  (the peer's ``host:port``: one connection carries one client's requests at a time) and belongs to
  the session whose request comes next on that connection — **if** nobody else on the same host
  could have sent that next request: no other connection of the host sent anything since, and,
  when it was sent and when it is claimed, the host had no other session open and no other
  connection holding sessionless requests of its own (a client between sessions, or one sleeping
  out its own Retry-After). Connections are pooled: a trainer's pool may hand the connection of A's
  refused request straight to B's first one, and nothing on the wire tells that from A retrying at
  once — B may be the only one awake at that moment (64 sessions woken one by one from the same
  ``Retry-After: 1`` take turns on a quiet host). Otherwise the request is counted as
  *unattributed*, and judged as nobody's retry. One client at a time loses nothing; concurrent
  sessions lose only their sessionless requests' retry judgement, never gain a false one;
* a connection whose sessionless requests never lead to a session (every ``/create_session``
  refused) becomes an episode of its own once it has been idle for ``idle_s``.

A session ends when it is deleted (``POST /delete`` answered 2xx or 404), when its owner ends it
(:meth:`Attributor.end`: reaped by the server, past its case's deadline), after ``idle_s`` without a
request if the server never opened it, and at :meth:`Attributor.close`; ``on_end`` then gets the
:class:`Episode`. Requests for a session that has ended are counted as late, not filed.

Bounded: each episode keeps at most ``max_requests`` requests (the rest are counted: a storm is
counted, not stored), each connection at most :data:`PENDING_LIMIT` waiting requests, and the ids
of ended sessions are remembered up to :data:`ENDED_MEMORY`. Not thread-safe: one owner feeds it
(an event loop, or under the owner's lock).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from orsbench import protocol
from orsbench.clientcheck.traffic import Seen, Traffic, group

#: Sessionless requests kept waiting per connection; older ones are counted as unattributed.
PENDING_LIMIT = 64
#: Ids of ended sessions remembered (to count their late requests rather than open them again).
ENDED_MEMORY = 20_000
#: Requests kept per episode unless the owner says otherwise.
MAX_REQUESTS = 2_000
#: Seconds after which a connection's sessionless requests, or a session the server never opened, end.
IDLE_S = 10.0
#: Seconds a session handed out but never opened (no ``/create`` yet) may stay quiet before it ends: a loaded
#: client is slow between its ``/create_session`` and its ``/create`` (BENCHMARKS.md, hosted at 1,000 sessions).
UNOPENED_S = 30.0


#: orsbench's own routes (a report, a request log): nobody's session traffic.
OWN_ROUTES = "/_orsbench/"


def host_of(peer: str) -> str:
    """The host part of a ``host:port`` peer (``[::1]:5000`` → ``[::1]``)."""
    return peer.rpartition(":")[0]


@dataclass
class Episode:
    """One client session's requests (or one connection's, when it never got a session)."""

    #: The session id, or ``"connection HOST:PORT"`` for a sessionless episode.
    key: str
    sid: str | None
    #: The connection its first request came on.
    peer: str | None
    started_at: float
    last_at: float
    requests: list[Seen] = field(default_factory=list)
    #: Requests past ``max_requests``: counted, not kept.
    dropped: int = 0
    #: ``/create`` answered 200: the server opened it.
    opened: bool = False
    #: Why it ended: ``deleted``, ``reaped``, ``deadline``, ``idle``, ``never opened``, ``still open at exit``.
    ended: str | None = None
    #: Sessionless requests of its connection that could not be told from another client's.
    unattributed: int = 0

    @property
    def total(self) -> int:
        return len(self.requests) + self.dropped

    def traffic(self) -> Traffic:
        """Its requests grouped, in the order they were sent (answers complete out of order)."""
        return group(sorted(self.requests, key=lambda s: s.exchange.started_at), self.dropped)


EndCallback = Callable[[Episode], None]


class Attributor:
    """Files each request of many concurrent clients under its session; ends sessions; hands them on."""

    def __init__(
        self, on_end: EndCallback, *, max_requests: int = MAX_REQUESTS, idle_s: float = IDLE_S, unopened_s: float | None = None
    ) -> None:
        """``unopened_s``: how long a session handed out (``/create_session`` answered) but not yet opened may stay
        quiet before it ends as "never opened" (default ``idle_s``). A loaded client can take longer than
        ``idle_s`` between its ``/create_session`` and its ``/create``: hosted mode at 1,000 sessions, 50 at
        once on a loaded machine, ended 58 such sessions before their ``/create`` came."""
        self.on_end = on_end
        self.max_requests = max_requests
        self.idle_s = idle_s
        self.unopened_s = idle_s if unopened_s is None else unopened_s
        #: Open episodes by key, oldest first.
        self.open: dict[str, Episode] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        #: Sessionless requests waiting for their connection's next session, by peer, each with whether
        #: someone else on its host could have sent the next request on its connection (``_contended``).
        self._pending: dict[str, list[tuple[Seen, bool]]] = {}
        #: Per host, its open sessions (episodes with a session id).
        self._sessions_on: dict[str, int] = {}
        #: Per host, its two most recently active connections and their latest request starts (``started``).
        self._recent: dict[str, list] = {}
        #: Sessionless requests never filed under a session (busy host, no connection, or dropped while waiting).
        self.unattributed = 0
        #: Requests for sessions that had ended.
        self.late = 0
        #: Per session id, its requests started and not yet answered: a session waiting on its own
        #: request is not idle (under load a ``/create`` can take longer than ``idle_s`` to answer).
        self._in_flight: dict[str, int] = {}

    @property
    def waiting(self) -> int:
        """Sessionless requests waiting on their connection for a session (or for their idle end)."""
        return sum(len(w) for w in self._pending.values())

    # -- what comes in ------------------------------------------------------------------
    def started(self, peer: str | None, at: float, path: str = "", sid: str | None = None) -> None:
        """A request for ``path`` began on ``peer`` at ``at`` (monotonic): the activity that tells a busy host from a quiet one.

        Per host only the two connections with the latest starts are kept, as ``[peer, at, peer, at]``:
        enough to answer "did any *other* connection start something since" for every connection, in
        constant memory and a few comparisons per request (this runs on every request a proxy forwards).
        ``sid``: the session the request was sent in (its header): until its answer is :meth:`seen`, the
        session is not idle.
        """
        if path == protocol.HEALTH or path.startswith(OWN_ROUTES):
            return
        if sid is not None:
            self._in_flight[sid] = self._in_flight.get(sid, 0) + 1
        if peer is None:
            return
        host = peer[: peer.rfind(":")]
        recent = self._recent.get(host)
        if recent is None:
            self._recent[host] = [peer, at, None, 0.0]
            return
        first, first_at, second, second_at = recent
        if peer == first:
            if at > first_at:
                recent[1] = at
        elif at >= first_at:
            recent[0], recent[1], recent[2], recent[3] = peer, at, first, first_at
        elif peer == second:
            if at > second_at:
                recent[3] = at
        elif at > second_at:
            recent[2], recent[3] = peer, at

    def seen(self, request: Seen) -> None:
        """A request's answer is complete (or cut): file it (health probes and orsbench's own routes are no client's)."""
        if request.path == protocol.HEALTH or request.path.startswith(OWN_ROUTES):
            return
        exchange = request.exchange
        peer = exchange.peer
        self.started(peer, exchange.started_at, request.path)
        sid = request.sid
        if sid is not None and sid in self._in_flight:
            if self._in_flight[sid] > 1:
                self._in_flight[sid] -= 1
            else:
                del self._in_flight[sid]
        if sid is None and request.path == protocol.CREATE_SESSION and exchange.status == 200:
            sid = exchange.task_id  # the session it handed out
        if sid is None:
            self._wait(request)
            return
        if sid in self._ended:
            self.late += 1
            return
        episode = self.open.get(sid)
        if episode is None:
            episode = self.open[sid] = Episode(sid, sid, peer, exchange.started_at, exchange.started_at)
            if peer is not None:
                host = host_of(peer)
                self._sessions_on[host] = self._sessions_on.get(host, 0) + 1
        self._claim(episode, peer)
        self._add(episode, request)
        if request.path == protocol.CREATE and exchange.status == 200:
            episode.opened = True
        if request.path == protocol.DELETE and exchange.status is not None and (200 <= exchange.status < 300 or exchange.status == 404):
            self.end(sid, "deleted")

    def end(self, key: str, why: str) -> None:
        """End the open episode ``key`` (a session id, or a sessionless episode's key) and hand it on."""
        episode = self.open.pop(key, None)
        if episode is None:
            return
        episode.ended = why
        if episode.sid is not None and episode.peer is not None:
            host = host_of(episode.peer)
            if self._sessions_on.get(host, 0) > 1:
                self._sessions_on[host] -= 1
            else:
                self._sessions_on.pop(host, None)
        self._in_flight.pop(key, None)
        self._ended[key] = None
        if len(self._ended) > ENDED_MEMORY:
            self._ended.popitem(last=False)
        self.on_end(episode)

    def sweep(self, now: float, *, abandoned_s: float | None = None) -> None:
        """End what has gone idle: sessionless connections and sessions the server never opened (after
        ``idle_s``), and opened sessions with no request for ``abandoned_s`` (a server's TTL would have reaped them)."""
        for peer, waiting in list(self._pending.items()):
            if waiting and now - max(s.exchange.started_at + s.exchange.elapsed for s, _ in waiting) > self.idle_s:
                self._connection_episode(peer)
        for key, episode in list(self.open.items()):
            if key in self._in_flight:  # waiting on an answer to one of its own requests
                continue
            idle = now - episode.last_at
            if not episode.opened and idle > (self.unopened_s if episode.sid else self.idle_s):
                self.end(key, "never opened" if episode.sid else "idle")
            elif episode.opened and abandoned_s is not None and idle > abandoned_s:
                self.end(key, f"left idle for {abandoned_s:g} s (a server's TTL reaps it)")

    def close(self, why: str = "still open at exit") -> None:
        """End everything: each open session, and each connection's waiting requests as its own episode."""
        for peer in list(self._pending):
            self._connection_episode(peer)
        for key in list(self.open):
            self.end(key, why)

    # -- attribution -------------------------------------------------------------------------
    def _wait(self, request: Seen) -> None:
        peer = request.exchange.peer
        if peer is None:
            self.unattributed += 1
            return
        contended = self._contended(peer, None)
        waiting = self._pending.setdefault(peer, [])
        waiting.append((request, contended))
        if len(waiting) > PENDING_LIMIT:
            del waiting[0]
            self.unattributed += 1

    def _claim(self, episode: Episode, peer: str | None) -> None:
        """File the sessionless requests waiting on ``peer`` under ``episode``, each only if the host was quiet since."""
        if peer is None:
            return
        waiting = self._pending.pop(peer, None)
        if not waiting:
            return
        contended = self._contended(peer, episode)
        for request, contended_then in waiting:
            if not (contended or contended_then) and self._quiet(peer, request.exchange.started_at):
                self._add(episode, request)
            else:
                episode.unattributed += 1
                self.unattributed += 1

    def _contended(self, peer: str, claimer: Episode | None) -> bool:
        """Whether someone on ``peer``'s host besides ``claimer`` could send the next request on ``peer``: another
        open session, or another connection holding sessionless requests (a client sleeping out a refusal)."""
        host = host_of(peer)
        others = self._sessions_on.get(host, 0)
        if claimer is not None and claimer.sid is not None and claimer.peer is not None and host_of(claimer.peer) == host:
            others -= 1
        if others > 0:
            return True
        return any(waiting and other != peer and host_of(other) == host for other, waiting in self._pending.items())

    def _quiet(self, peer: str, since: float) -> bool:
        """Whether no other connection of ``peer``'s host started a request at or after ``since``."""
        recent = self._recent.get(peer[: peer.rfind(":")])
        if recent is None:
            return True
        other_at = recent[1] if recent[0] != peer else (recent[3] if recent[2] is not None else None)
        return other_at is None or other_at < since

    def _connection_episode(self, peer: str) -> None:
        """A connection's sessionless requests, with no session to file them under, as an episode of their own."""
        waiting = self._pending.pop(peer, None)
        if not waiting:
            return
        first = waiting[0][0].exchange.started_at
        if any(contended for _, contended in waiting) or not self._quiet(peer, first):
            self.unattributed += len(waiting)  # a busy host: whose requests these were cannot be told
            return
        key = f"connection {peer}"
        episode = Episode(key, None, peer, first, first)
        for request, _ in waiting:
            self._add(episode, request)
        self.open[key] = episode
        self.end(key, "idle")

    def _add(self, episode: Episode, request: Seen) -> None:
        episode.last_at = max(episode.last_at, request.exchange.started_at + request.exchange.elapsed)
        if len(episode.requests) < self.max_requests:
            episode.requests.append(request)
        else:
            episode.dropped += 1
