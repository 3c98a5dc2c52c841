"""Since when each pinned defect fails: the boundaries ``orsbench versions`` found, as data the matrix reads.

A pin says what the pinned release does; it does not say since when. ``orsbench versions CLIENT --record`` runs the
client's releases, bisects the cells that change and writes, per pinned defect, its first and last failing release
into :data:`SINCE_FILE` (one file, written only by that command: never typed by hand). ``orsbench matrix`` and
docs/compatibility.md read it here and show it beside each defect (:attr:`Since.words`), linked to the change
(:func:`change_link`); the history page (``orsbench versions --html``) shows the same words and links.

A record is read from the client's own series only (its own package's releases, no companion pinned): that is what
"since" means to someone who pins the client. What the words promise:

* ``since 0.1.2`` — 0.1.2 fails and the release before it was seen without the defect (every release between tried);
* ``since ≤ 0.1.101`` — no release before it was seen without it: the oldest run already failed, or the ones before
  it could not be played (a release orsbench's adapter cannot drive hides a defect, it does not fix it);
* ``since 0.1.0 (first release)`` — the oldest run fails and no release is older;
* ``0.1.0–0.2.0`` — fixed after 0.2.0 (the next release run was seen without it); several such spans where it came back;
* ``not seen in 0.1.0–0.1.4`` — no release run showed it (the cases that decide it were hidden);
* ``not bisected`` — no record: ``orsbench versions`` has not been run on that client, or not on a case that shows it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KIND", "NOT_BISECTED", "SINCE_FILE", "Change", "Since", "change_link", "dump", "load"]

#: The recorded boundaries (package data; ``orsbench versions --record`` writes it).
SINCE_FILE = Path(__file__).resolve().with_name("since.json")
KIND = "orsbench-since"
#: What a defect without a record reads.
NOT_BISECTED = "not bisected"

#: Where a package's changes between two releases can be read (``{a}``: the older release, ``{b}``: the newer):
#: a compare view where the project tags its releases publicly; else :func:`change_link` gives the newer release's page.
COMPARE = {
    "trl": "https://github.com/huggingface/trl/compare/v{a}...v{b}",
}


def change_link(package: str, older: str, newer: str) -> str:
    """A link to what changed from ``older`` to ``newer``: the compare view, else the newer release's index page."""
    if package in COMPARE:
        return COMPARE[package].format(a=older, b=newer)
    return f"https://pypi.org/project/{package}/{newer}/"


@dataclass(frozen=True)
class Change:
    """Two releases run either side of a boundary: ``last`` did one thing (``before``), ``first`` the other.

    ``exact``: every release between the two was tried (none left out for want of a run).
    """

    last: str
    first: str
    before: str
    after: str
    exact: bool = True


@dataclass(frozen=True)
class Since:
    """One pinned defect's history in one client's releases, as ``orsbench versions`` found it."""

    client: str
    defect: str
    package: str
    first_failing: str | None
    last_failing: str | None
    #: Every span of releases that failed it, oldest first (more than one where it was fixed and came back).
    spans: tuple[tuple[str, str], ...] = ()
    #: No release before ``first_failing`` was seen without it.
    since_oldest_tested: bool = False
    still_failing: bool = False
    #: The oldest and newest release run.
    tested: tuple[str, str] | None = None
    #: The package's first release on the index (``first_failing`` may be it).
    first_release: str | None = None
    #: The boundary where it shows (from a release without it, or one that could not be played), and where it was fixed.
    appeared: Change | None = None
    fixed: Change | None = None
    #: When and by what it was recorded (``orsbench versions …``, orsbench's version, the date).
    recorded: dict[str, str] = field(default_factory=dict)

    @property
    def words(self) -> str:
        """``since 0.1.2``, ``since ≤ 0.1.101``, ``0.1.0–0.2.0``: what the matrix's "since" column says."""
        if self.first_failing is None or self.last_failing is None:
            return f"not seen in {self.tested[0]}–{self.tested[1]}" if self.tested else NOT_BISECTED
        spans = list(self.spans) or [(self.first_failing, self.last_failing)]
        shown = [f"{self._first() if i == 0 else a}–{b}" for i, (a, b) in enumerate(spans)]
        if self.still_failing:
            first = self._first() if len(spans) == 1 else spans[-1][0]
            shown[-1] = f"since {first}" + (" (first release)" if len(spans) == 1 and self._oldest_of_all else "")
        return ", ".join(shown)

    @property
    def _oldest_of_all(self) -> bool:
        """It fails from the package's first release (no release is older)."""
        return self.since_oldest_tested and self.first_failing == self.first_release

    def _first(self) -> str:
        """The first failing release, ``≤`` where an older release might have had it too (none was seen without it)."""
        assert self.first_failing is not None
        if self._oldest_of_all:
            return self.first_failing
        if self.since_oldest_tested or (self.appeared is not None and not self.appeared.exact):
            return f"≤ {self.first_failing}"
        return self.first_failing

    @property
    def url(self) -> str | None:
        """The change to read: where it appeared (the diff, or the first failing release's page), else None."""
        if self.appeared is not None:
            return change_link(self.package, self.appeared.last, self.appeared.first)
        if self.first_failing is not None:
            return f"https://pypi.org/project/{self.package}/{self.first_failing}/"
        return None

    @property
    def fix_url(self) -> str | None:
        """The change that fixed it (None while it still fails)."""
        return change_link(self.package, self.fixed.last, self.fixed.first) if self.fixed is not None else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "words": self.words, "url": self.url, "fix_url": self.fix_url}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Since:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["spans"] = tuple(tuple(span) for span in known.get("spans") or ())
        known["tested"] = tuple(known["tested"]) if known.get("tested") else None
        for key in ("appeared", "fixed"):
            known[key] = Change(**known[key]) if known.get(key) else None
        return cls(**known)


def load(path: Path | None = None) -> dict[str, dict[str, Since]]:
    """``client -> defect -> Since`` as recorded in ``path`` (:data:`SINCE_FILE`); empty where nothing was (every defect
    then reads "not bisected")."""
    path = path or SINCE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return {}
    out: dict[str, dict[str, Since]] = {}
    for client, entry in (data.get("clients") or {}).items():
        recorded = dict(entry.get("recorded") or {})
        out[client] = {d["defect"]: Since.from_json({**d, "client": client, "recorded": recorded}) for d in entry.get("defects") or []}
    return out


def dump(records: dict[str, dict[str, Since]], path: Path | None = None) -> None:
    """Write ``records`` to ``path``, replacing the clients they name and keeping every other client's (one defect a
    line, what was recorded when and by which command once per client)."""
    path = path or SINCE_FILE
    kept = load(path)
    kept.update(records)
    blocks = []
    for client in sorted(kept):
        entries = sorted(kept[client].values(), key=lambda s: s.defect)
        recorded = entries[0].recorded if entries else {}
        lines = [json.dumps({k: v for k, v in asdict(s).items() if k not in ("client", "recorded")}, ensure_ascii=False) for s in entries]
        body = ",\n   ".join(lines)
        blocks.append(f'  {json.dumps(client)}: {{\n   "recorded": {json.dumps(recorded, ensure_ascii=False)},\n   "defects": [\n   {body}\n   ]\n  }}')
    text = '{\n "kind": "' + KIND + '",\n "clients": {\n' + ",\n".join(blocks) + "\n }\n}\n"
    json.loads(text)  # the file stays JSON, whatever the layout
    path.write_text(text)
