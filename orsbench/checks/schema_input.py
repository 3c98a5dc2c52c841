"""The checker's names for :mod:`orsbench.schema_examples` (the one JSON-Schema example builder)."""

from orsbench.schema_examples import NoInput, errors, invalid_input, minimal_input, schema_problems, validator, variants

__all__ = ["NoInput", "errors", "invalid_input", "minimal_input", "schema_problems", "validator", "variants"]
