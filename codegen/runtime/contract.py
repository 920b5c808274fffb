"""What ctrgen writes and the runtime reads: the trained model's data contract (standard library only, so the
renderers import it without torch)."""

FEATURES_FILE = "features.json"   # beside train_torch.py and in its --output-dir
MANIFEST = "MANIFEST.json"        # what ctrgen wrote into a folder (generated/<name>/, a deployed repository)
BEST_DIR = "best"                 # in --output-dir: the best evaluation's model.pt and features.json
FEATURES_FORMAT = 1               # features.json's "ctrgen_torch_features"
# Format 2 adds slots sized from the data ("cardinality": null, "rows_from": "data" until the trainer scans it) and
# per such input its tables' HugeCTR capacity ("hugectr_tables"); a file without them stays format 1.
ROWS_FROM_DATA_FORMAT = 2
FEATURES_FORMATS = (FEATURES_FORMAT, ROWS_FROM_DATA_FORMAT)
ROWS_FROM_DATA = "data"
# The HugeCTR Triton backend's inputs, which the preprocessing model writes and the PyTorch model step reads (their
# data types and the rest of the backend's rules: codegen/hugectr/backend.py).
DES, CATCOLUMN, ROWINDEX = "DES", "CATCOLUMN", "ROWINDEX"


def layout_of(features: dict) -> dict:
    """What a trainer's code depends on (names, order, list widths); cardinalities and dtypes may change."""
    return {"labels": [c["name"] for c in features["labels"]],
            "continuous": [c["name"] for c in features["continuous"]],
            "sparse": [[s["input"], s["nnz"], [c["name"] for c in s["columns"]]] for s in features["sparse"]]}


def under_home(path: str) -> bool:
    """A spec path under the home folder of the machine that runs the job: ``~`` or ``~/...``, which means what
    ``os.path.expanduser`` gives there (HugeCTR itself does not expand ``~``). ``~name`` forms are not one."""
    return path == "~" or path.startswith("~/")


def local_path(path: str) -> str:
    """``path`` as the process that reads it must open it: a path under the home folder expanded here."""
    import os.path

    return os.path.expanduser(path) if under_home(path) else path
