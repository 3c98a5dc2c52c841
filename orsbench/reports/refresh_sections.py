"""``python -m orsbench.reports.refresh_sections``: refresh the packaged protocol section titles.

Run it after a numbered heading of docs/protocol.md is added or renamed (tests/test_html_report.py
says so when they drift). A module of its own because ``orsbench.reports`` imports
:mod:`~orsbench.reports.links` itself, and ``-m`` on an imported module warns.
"""

from orsbench.reports.links import refresh

if __name__ == "__main__":
    raise SystemExit(refresh())
