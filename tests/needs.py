"""``@needs("sdk")``: a test that needs an optional extra skips, saying which, where the extra is not installed.

The full suite (CI: ``pip install -e ".[all]"``) has every extra, so nothing skips there; the core tests run
on a base install (``tox -e py312-core``), where a test that needs the openreward SDK says so instead of
failing on an import.
"""

from __future__ import annotations

import pytest

from orsbench.extras import EXTRAS, installed


def needs(extra: str) -> pytest.MarkDecorator:
    missing = [module for module in EXTRAS[extra] if not installed(module)]
    return pytest.mark.skipif(bool(missing), reason=f'needs the {extra} extra ({", ".join(missing)} missing): pip install "orsbench[{extra}]"')
