"""Spec paths under the home folder: where ``~`` means what ``os.path.expanduser`` gives on the machine that runs the
job, and where it is refused (issue 24: a value that exists only where the script runs is kept as the same
expression, or refused, never passed on as a different literal; HugeCTR itself does not expand ``~``).

``data.train``, ``data.eval`` and ``training.graph_json`` may be ``~`` or start with ``~/``: model.py writes them as
``os.path.expanduser("~/...")``, ``ctrgen train`` and the PyTorch runtime expand them where they read the data. The
same three may be an environment variable's path, ``${NAME-DEFAULT}rest`` (``codegen.runtime.contract.env_path``:
``os.environ.get(NAME, DEFAULT)`` followed by rest, or joined with it), one default per variable. Every other path
field, and every string of an ``args:`` map (HugeCTR arguments), that starts with ``~`` or ``${`` is refused with its
line, as is ``~name/...`` (another user's home folder) anywhere, and a ``~`` or ``${`` data path where a consumer
would pass it on unexpanded (continuous training's passes and low-level loop, Vertex AI's task.py and submit.py).
"""

from __future__ import annotations

from ..errors import Problem, Problems, UserError, field_path
from ..runtime.contract import env_path, under_home
from ..specfile.load import LoadedSpec

EXPANDED = "data.train, data.eval and training.graph_json"
# Path fields written or read as given: (section, field) -> the field's value(s).
_AS_GIVEN = (
    ("training", "snapshot_prefix"), ("offline_inference", "graph_json"), ("offline_inference", "compare_with"),
    ("continuous_training", "sparse_models"), ("continuous_training", "dense_model"),
    ("continuous_training", "local_paths"), ("continuous_training", "save_prefix"),
    ("vertex", "train_data"), ("vertex", "valid_data"), ("vertex", "schema_path"),
    ("etl", "output"), ("etl", "join"), ("etl", "inputs"), ("etl", "cluster"),
)
_ETL_PATHS = {"output": ("dir",), "join": ("path",), "inputs": ("train", "valid"), "cluster": ("local_directory",)}


def check_home_paths(loaded: LoadedSpec) -> None:
    """Raise one UserError with every ``~`` path of ``loaded``'s spec that would not mean the home folder."""
    problems = Problems()
    for loc, message, fix in home_path_problems(loaded):
        line, col = loaded.where(*loc)
        problems.items.append(Problem(str(loaded.path), message, field_path(loc), line, col, fix))
    if problems:
        raise UserError(problems.sorted())


def home_path_problems(loaded: LoadedSpec) -> list[tuple[tuple, str, str]]:
    spec = loaded.spec
    out: list[tuple[tuple, str, str]] = []
    expanded = [(("data", "train", i), p) for i, p in enumerate(spec.data.train)] + [(("data", "eval"), spec.data.eval)]
    if spec.training.graph_json is not None:
        expanded.append((("training", "graph_json"), spec.training.graph_json))
    defaults: dict[str, str] = {}
    for loc, path in expanded:
        env = env_path(path)
        if path.startswith("${") and env is None:
            out.append((loc, f"{path!r} is not an environment variable's path: ${{NAME-DEFAULT}} followed by text "
                             "(appended) or by / and a relative path (os.path.join)",
                        "write e.g. ${DATA_DIR-/data/}train/_file_list.txt"))
            continue
        if env is not None:
            if env.default.startswith("${") or (env.default.startswith("~") and not under_home(env.default)):
                out.append((loc, f"{path!r}: the default of ${{{env.name}}} is a path: absolute, relative, ~ or ~/...",
                            "write the default as a path"))
                continue
            if defaults.setdefault(env.name, env.default) != env.default:
                out.append((loc, f"{path!r}: ${{{env.name}}} has the default {defaults[env.name]!r} in another path; "
                                 "a script reads a variable with one default", "give every use the same default"))
                continue
        elif not path.startswith("~"):
            continue
        elif not under_home(path):
            out.append((loc, f"{path!r}: only '~' and '~/...' (the home folder of the machine that runs the job) are "
                             "expanded, not '~name' forms", "write ~/... or an absolute path"))
            continue
        what = "is under the home folder" if env is None else f"reads ${{{env.name}}}"
        if spec.continuous_training is not None:
            out.append((loc, f"{path!r} {what}, which continuous training's passes and low-level loop would pass to "
                             "HugeCTR unexpanded", "write the absolute path"))
        elif spec.vertex is not None and loc[0] == "data":
            out.append((loc, f"{path!r} {what}, which Vertex AI's task.py and submit.py would pass on unexpanded",
                        "write the absolute path (or a gs:// one)"))
    for section, name in _AS_GIVEN:
        part = getattr(spec, section, None)
        if part is None:
            continue
        if section == "etl":
            sub = getattr(part, name, None)
            for field in _ETL_PATHS[name] if sub is not None else ():
                out += _refused((section, name, field), getattr(sub, field, None))
        else:
            out += _refused((section, name), getattr(part, name, None))
    out += _in_args((), spec.model_dump(exclude={"etl"}), in_args=False)
    return out


def _refused(loc: tuple, value: object) -> list[tuple[tuple, str, str]]:
    """A path field that is written or read as given: ``~`` there would be a folder named ``~``."""
    if isinstance(value, str) and value.startswith(("~", "${")):
        return [(loc, f"{value!r} starts with {value[:1 if value[0] == '~' else 2]!r}, which is passed on as it is "
                      f"here: only {EXPANDED} are expanded (the home folder, an environment variable)",
                 "write the absolute path")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _refused((*loc, i), v)]
    return []


def _in_args(loc: tuple, value: object, in_args: bool) -> list[tuple[tuple, str, str]]:
    """Strings of ``args:`` maps (HugeCTR arguments, written into the scripts as they are)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _in_args((*loc, k), v, in_args or _is_args(loc, k, v))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _in_args((*loc, i), v, in_args)]
    if in_args and isinstance(value, str) and value.startswith(("~", "${")):
        return [(loc, f"{value!r} starts with {value[:1 if value[0] == '~' else 2]!r}, which HugeCTR does not expand: "
                      f"only {EXPANDED} are expanded (the home folder, an environment variable)",
                 "write the absolute path")]
    return []


def _is_args(loc: tuple, key: str, value: object) -> bool:
    # The spec's maps of HugeCTR arguments (ExtraArgs): args, params, predict, generate, compile, shard.
    return isinstance(value, dict) and key in ("args", "params", "predict", "generate", "compile", "shard")
