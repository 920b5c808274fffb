"""A saved workflow's ``output_schema.pbtxt`` for tests whose workflow folder is a stand-in (no real workflow.pkl):
``ctrgen assemble`` checks the workflow against the features lock through this file."""

from __future__ import annotations

import warnings
from pathlib import Path


def write_output_schema(folder: Path, cardinalities: dict, label: str) -> None:
    """output_schema.pbtxt of a workflow with these categorical outputs (int64) and an int8 target."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from merlin.schema import ColumnSchema, Schema, Tags
        from merlin.schema.io.tensorflow_metadata import TensorflowMetadata

    columns = [ColumnSchema(name, dtype="int64", tags=[Tags.CATEGORICAL],
                            properties={"embedding_sizes": {"cardinality": card, "dimension": 16}})
               for name, card in cardinalities.items()]
    columns.append(ColumnSchema(label, dtype="int8", tags=[Tags.TARGET]))
    TensorflowMetadata.from_merlin_schema(Schema(columns)).to_proto_text_file(str(folder), "output_schema.pbtxt")


# The committed specs/movielens.features.lock.json (ml-25m).
MOVIELENS = {"userId": 162542, "movieId": 56586}
