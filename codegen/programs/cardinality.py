"""An NVTabular schema's cardinality of a column: the rule is written once, here. codegen.workflow_schema reads
schema files with it, and the generated task.py (templates/hugectr/task.py.j2) includes its part verbatim to read
--schema with it at run time, so both agree on every schema.

Included verbatim in the generated task.py: the part may use only the standard library (codegen/programs/__init__.py).
"""


# ctrgen: part rule
def int_or_none(v):
    """int64 proto fields arrive as int (pbtxt), str (JSON) or float (Struct); None/0-as-unset stay as given."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"expected an integer, got {v!r}")
    return int(v)


def schema_cardinality(embedding_sizes, domain_max, name):
    """A column's cardinality in an NVTabular schema: ``embedding_sizes.cardinality``, else ``int_domain.max + 1``;
    None when neither exists, ValueError when it is not a whole positive number."""
    card = int_or_none((embedding_sizes or {}).get("cardinality")) if isinstance(embedding_sizes, dict) else None
    if card is None and domain_max is not None:
        card = int_or_none(domain_max) + 1
    if card is not None and card <= 0:
        raise ValueError(f"cardinality of {name!r} must be positive, got {card}")
    return card
