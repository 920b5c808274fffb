"""The static parts of the generated task.py (templates/hugectr/task.py.j2): HugeCTR training with every knob as a
command-line argument, for Vertex AI and multi-node runs.

Included verbatim in the generated task.py: the parts may use only what task.py imports (argparse, json, logging, os,
sys; hugectr, google.protobuf, tensorflow_metadata and hypertune inside functions), never codegen. The template
includes codegen/programs/cardinality.py's part before these.
"""

import json
import os

from .cardinality import schema_cardinality

# The model's facts, which the template writes (stand-ins, never included).
HYPERTUNE_METRIC = "AUC"


# ctrgen: part helpers
def pick(override, generated):
    """An argument's value when given, else the spec's value for this layer (layers whose values differ)."""
    return generated if override is None else override


def read_cardinalities(path):
    """{column: cardinality} of an NVTabular schema: schema.pbtxt (protobuf + tensorflow-metadata), falling back to
    the .merlin/schema.json beside it, or a schema.json. Cardinality = embedding_sizes.cardinality, else
    int_domain.max + 1."""
    if not path.endswith(".json"):
        try:
            from google.protobuf import json_format, struct_pb2, text_format
            from tensorflow_metadata.proto.v0 import schema_pb2
        except ImportError:
            fallback = os.path.join(os.path.dirname(path), ".merlin", "schema.json")
            if not os.path.isfile(fallback):
                raise ValueError("reading schema.pbtxt needs protobuf and tensorflow-metadata (or a "
                                 ".merlin/schema.json beside it)") from None
            return read_cardinalities(fallback)
        with open(path, encoding="utf-8") as fh:
            schema = text_format.Parse(fh.read(), schema_pb2.Schema())
        features = []
        for f in schema.feature:
            extra = {}
            if f.annotation.extra_metadata:
                struct = struct_pb2.Struct()
                struct.ParseFromString(f.annotation.extra_metadata[0].value)
                extra = json_format.MessageToDict(struct)
            domain_max = f.int_domain.max if f.HasField("int_domain") and f.int_domain.HasField("max") else None
            features.append((f.name, extra, domain_max))
    else:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        features = []
        for f in doc.get("feature", []):
            extra = ((f.get("annotation") or {}).get("extraMetadata") or [{}])[0]
            features.append((f["name"], extra, (f.get("intDomain") or {}).get("max")))
    cards = {}
    for name, extra, domain_max in features:
        card = schema_cardinality(extra.get("embedding_sizes"), domain_max, name)
        if card is not None:
            cards[name] = card
    return cards


def local_path(path):
    """Vertex AI mounts Cloud Storage at /gcs/ (GCS FUSE)."""
    return "/gcs/" + path[len("gs://"):] if path.startswith("gs://") else path


# ctrgen: part report
def report(auc, args):
    """Report the final AUC to Vertex AI hyperparameter tuning when cloudml-hypertune is installed."""
    try:
        import hypertune
    except ImportError:
        print(f"{HYPERTUNE_METRIC}={auc} (hypertune is not installed; not reported)")
        return
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=HYPERTUNE_METRIC, metric_value=auc,
        global_step=args.max_iter if args.num_epochs == 0 else args.num_epochs)
    print(f"{HYPERTUNE_METRIC}={auc} (reported to hypertune)")
