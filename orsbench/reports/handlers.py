"""A handler per report file: JSON, JUnit, Markdown and HTML, each written when the run ends.

The terminal's handler is :class:`~orsbench.reports.terminal.TerminalReporter` (it renders every
event as it comes). A file format needs the whole run, so its handler writes at
:class:`~orsbench.reports.events.RunFinished`, from the event's report — the run's one record —
with the same renderer that format always had: the bytes are the same whichever front end
streamed the run. :func:`file_handlers` builds the handlers a command's flags ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orsbench.reports.events import Event, RunFinished
from orsbench.reports.output import write_text

if TYPE_CHECKING:
    from orsbench.checks.runner import Report

Render = Callable[["Report"], str]


@dataclass
class FileHandler:
    """Writes one format of the run's report to ``path`` (``-``: stdout) when the run finishes."""

    #: The format's name, as its flag spells it (``json``, ``junit``, ``html``, ``markdown``).
    format: str
    path: str | Path
    render: Render
    #: Whether it wrote (a run that ended before its RunFinished writes nothing, as before).
    written: bool = False

    def handle(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            write_text(self.path, self.render(event.report))
            self.written = True

    def shutdown(self) -> None:
        """Nothing is held open: the file is written whole at RunFinished."""


def json_handler(path: str | Path) -> FileHandler:
    from orsbench.reports.json_report import dumps

    return FileHandler("json", path, dumps)


def junit_handler(path: str | Path) -> FileHandler:
    from orsbench.reports.junit import junit_xml

    return FileHandler("junit", path, junit_xml)


def html_handler(path: str | Path, *, title: str, docs_url: str | None = None) -> FileHandler:
    from orsbench.reports.html import render_check

    return FileHandler("html", path, lambda report: render_check(report, title=title, docs_url=docs_url))


def markdown_handler(path: str | Path, *, title: str, docs_url: str | None = None) -> FileHandler:
    from orsbench.reports.markdown import render_markdown

    return FileHandler("markdown", path, lambda report: render_markdown(report, title=title, docs_url=docs_url))


def file_handlers(paths: Mapping[str, str | Path | None], *, title: str, docs_url: str | None = None) -> list[FileHandler]:
    """A handler for each format in ``paths`` given a path (``{"json": "r.json", "junit": None, ...}``), in its order.

    ``title`` and ``docs_url`` are the HTML page's and the Markdown summary's (``orsbench check``, where links point).
    """
    build: dict[str, Callable[[str | Path], FileHandler]] = {
        "json": json_handler,
        "junit": junit_handler,
        "html": lambda path: html_handler(path, title=title, docs_url=docs_url),
        "markdown": lambda path: markdown_handler(path, title=title, docs_url=docs_url),
    }
    unknown = [name for name in paths if name not in build]
    if unknown:
        raise ValueError(f"no report format {', '.join(unknown)}: the formats are {', '.join(build)}")
    return [build[name](path) for name, path in paths.items() if path]
