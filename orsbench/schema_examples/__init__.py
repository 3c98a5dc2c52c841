"""The one JSON-Schema example builder: minimal, boundary, fuzzed and invalid tool inputs.

Minimal valid (and deliberately invalid) tool inputs from a server's own JSON Schemas,
plus the *boundary* inputs and the seeded hypothesis strategy (hypothesis-jsonschema)
the checker's fuzz uses to find inputs on which a tool raises or hangs. The checker
(``orsbench.checks``), the load driver and the conformance suite build their
examples here.

Four rooms, each pointing only at those above it in this list:

* :mod:`.resolve` — local ``$ref`` and ``allOf`` inlined, an object schema's properties;
* :mod:`.validate` — ``jsonschema`` validation and why a schema is unusable;
* :mod:`.examples` — the minimal input, task-seeded variants, an invalid input;
* :mod:`.fuzz` — boundary inputs, the hypothesis strategy and search.

Every value built is validated against the full schema before it is used, so a
generator mistake can only lead to a skip ("no input could be built"), never to
a false accusation against the server. Schemas are untrusted input: recursion
is bounded and only local ``$ref`` is followed.
"""

from orsbench.schema_examples.examples import FORMAT_EXAMPLES, invalid_input, minimal_input, variants
from orsbench.schema_examples.fuzz import (
    BOUNDARY_CLASSES,
    BOUNDARY_NUMBERS,
    BOUNDARY_STRINGS,
    LONG_NUMERIC_LENGTH,
    LONG_STRING_LENGTH,
    boundary_inputs,
    can_fuzz,
    duration_fields,
    boundary_rounds,
    input_strategy,
    preload,
    search,
    simpler_inputs,
    size,
)
from orsbench.schema_examples.resolve import NoInput, properties
from orsbench.schema_examples.validate import errors, schema_problems, validator

__all__ = [
    "BOUNDARY_CLASSES",
    "BOUNDARY_NUMBERS",
    "BOUNDARY_STRINGS",
    "FORMAT_EXAMPLES",
    "LONG_NUMERIC_LENGTH",
    "LONG_STRING_LENGTH",
    "NoInput",
    "boundary_inputs",
    "can_fuzz",
    "duration_fields",
    "boundary_rounds",
    "errors",
    "input_strategy",
    "invalid_input",
    "minimal_input",
    "preload",
    "simpler_inputs",
    "size",
    "properties",
    "schema_problems",
    "search",
    "validator",
    "variants",
]
