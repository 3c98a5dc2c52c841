"""Every release, not only the pinned one: run a client's releases over its matrix cases, each in its own cached
environment, bisect the cells that change, and say per pinned defect its first and last failing release.

``orsbench versions`` (``orsbench/cli/versions.py``) is the front end; docs/versions.md tells the story.
"""
