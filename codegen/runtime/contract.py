"""What ctrgen writes and the runtime reads: the trained model's data contract (standard library only, so the
renderers import it without torch)."""

import re
from dataclasses import dataclass

FEATURES_FILE = "features.json"   # beside train_torch.py and in its --output-dir
MANIFEST = "MANIFEST.json"        # what ctrgen wrote into a folder (generated/<name>/, a deployed repository)
BEST_DIR = "best"                 # in --output-dir: the best evaluation's model.pt and features.json
FEATURES_FORMAT = 1               # features.json's "ctrgen_torch_features"
# Format 2 adds slots sized from the data ("cardinality": null, "rows_from": "data" until the trainer scans it) and
# per such input its tables' HugeCTR capacity ("hugectr_tables"); a file without them stays format 1.
ROWS_FROM_DATA_FORMAT = 2
ROWS_FROM_DATA = "data"
# Format 3 adds label columns named by the data (an imported script's Parquet reader with label_dim > 1: HugeCTR takes
# them from _metadata.json): "name": null, "name_from": "_metadata.json" until the trainer reads it
# (runtime/label_names.py); the other keys of format 2 may be there too.
LABELS_FROM_METADATA_FORMAT = 3
HUGECTR_METADATA = "_metadata.json"   # beside a Parquet data set's first listed file, as HugeCTR's reader opens it
FEATURES_FORMATS = (FEATURES_FORMAT, ROWS_FROM_DATA_FORMAT, LABELS_FROM_METADATA_FORMAT)
# The HugeCTR Triton backend's inputs, which the preprocessing model writes and the PyTorch model step reads (their
# data types and the rest of the backend's rules: codegen/hugectr/backend.py).
DES, CATCOLUMN, ROWINDEX = "DES", "CATCOLUMN", "ROWINDEX"


def layout_of(features: dict) -> dict:
    """What a trainer's code depends on (names, order, list widths); cardinalities and dtypes may change."""
    # a label named by the data is None: the same before and after the trainer reads its name
    return {"labels": [None if c.get("name_from") == HUGECTR_METADATA else c["name"] for c in features["labels"]],
            "continuous": [c["name"] for c in features["continuous"]],
            "sparse": [[s["input"], s["nnz"], [c["name"] for c in s["columns"]]] for s in features["sparse"]]}


def under_home(path: str) -> bool:
    """A spec path under the home folder of the machine that runs the job: ``~`` or ``~/...``, which means what
    ``os.path.expanduser`` gives there (HugeCTR itself does not expand ``~``). ``~name`` forms are not one."""
    return path == "~" or path.startswith("~/")


# A spec path read from an environment variable, as a script's os.environ.get(NAME, DEFAULT) reads it:
# "${NAME-DEFAULT}REST" is the variable's value (DEFAULT where it is unset; a DEFAULT of ~ or ~/... is the home folder
# there) followed by REST; "${NAME-DEFAULT}/REST" is os.path.join of the value and REST. DEFAULT holds no "}".
ENV_PATH = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)-([^}]*)\}(.*)", re.S)


@dataclass(frozen=True)
class EnvPath:
    name: str
    default: str        # as a spec path: ~/... is the home folder where the job runs
    joined: bool        # os.path.join(value, rest), else value + rest
    rest: str


def env_path(path: str) -> EnvPath | None:
    """The parts of a "${NAME-DEFAULT}..." spec path, or None where ``path`` is not of that form (a "/" right after
    the "}" joins the rest: it must then be a relative path, as os.path.join keeps the value only before one)."""
    m = ENV_PATH.fullmatch(path)
    if m is None:
        return None
    name, default, rest = m.groups()
    if rest.startswith("/"):
        return EnvPath(name, default, True, rest[1:]) if rest[1:] and not rest.startswith("//") else None
    return EnvPath(name, default, False, rest)


def read_where_it_runs(path: str) -> bool:
    """A spec path whose value is known only where the job runs: under the home folder, or an environment variable's."""
    return under_home(path) or path.startswith("${")


def local_path(path: str) -> str:
    """``path`` as the process that reads it must open it: a path under the home folder expanded here; an environment
    variable's read here, as the script's os.environ.get(NAME, DEFAULT) does."""
    import os
    import posixpath

    env = env_path(path)
    if env is not None:
        value = os.environ.get(env.name, local_path(env.default))
        return posixpath.join(value, env.rest) if env.joined else value + env.rest
    return os.path.expanduser(path) if under_home(path) else path
