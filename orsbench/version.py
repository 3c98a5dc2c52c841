"""orsbench's version, in a module that imports nothing.

Why its own module: a report stamps the version it was made with, and a report
sits high in the layers; reading ``orsbench.__version__`` would import the
package's public surface (servers, scenarios) into every layer that asks.
Kept equal to ``pyproject.toml``'s ``version`` by ``tests/test_layering.py``.
"""

__version__ = "0.1.0"
