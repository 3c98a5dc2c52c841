"""What orsbench knows of other projects' ORS clients, as data: how each one sees a tool's JSON Schema
(:mod:`~orsbench.upstream.schema_view`) and the defects pinned against each
(:mod:`~orsbench.upstream.defects`).

Why a package of its own, low in the layers: the checker's binding predictions
(``checks/binding.py``), the client cases (``clientcheck``) and the client runner
(``clients``) all read it, and it reads nothing of theirs.
"""
