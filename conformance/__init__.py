"""The OpenRewardSpec conformance suite: ``pytest -n auto conformance/`` (see docs/conformance.md).

A package so that its helper modules (``targets``, ``adapter``, ``schema_view``,
``defects``, ``snapshots``) import as ``conformance.*`` and never collide with
modules of the same name elsewhere.
"""
