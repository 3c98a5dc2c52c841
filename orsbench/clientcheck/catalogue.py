"""The case catalogue, registered when this module is imported: :data:`~orsbench.clientcheck.cases.CASES` loads it.

Why a module of its own: building the catalogue imports every scenario and
fault profile, which a process that only reads the adapter contract (each
built-in client's adapter, once per episode) has no use for.
"""

from orsbench.clientcheck.cases import register_all

register_all()
