"""The arguments of recorded hugectr calls as spec values: names of positional arguments for the release, enum
members as ``Type.Member``, value objects as nested mappings, and one refusal for a value the reader cannot know."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Located
from ..features import Features
from ..graph.ir import Enum
from .calls import Call, Obj, Script, Unknown, value_repr
from .signatures import param_names
from .values import HomePath, first_unknown

SOLVER_TYPED = ("seed", "vvgpu", "batchsize", "batchsize_eval", "max_eval_batches", "lr", "warmup_steps",
                "decay_start", "decay_steps", "decay_power", "end_lr", "repeat_dataset", "use_mixed_precision",
                "scaler", "enable_tf32_compute", "use_cuda_graph")
OPTIMIZER_TYPED = ("beta1", "beta2", "epsilon", "initial_accu_value", "momentum_factor", "atomic_update", "beta",
                   "lambda1", "lambda2")
READER_FORMATS = {"Parquet": "parquet", "Norm": "norm", "Raw": "raw", "RawAsync": "raw_async"}
FIT_TYPED = ("num_epochs", "max_iter", "display", "eval_interval", "snapshot", "snapshot_prefix")


# Calls of HugeCTR 3.0/3.1 scripts and what replaced them in 3.2 (the first release ctrgen reads).
PRE_3_2_API = {"solver_parser_helper": "hugectr.CreateSolver and hugectr.DataReaderParams",
               "optimizer.CreateOptimizer": "hugectr.CreateOptimizer"}

# The path arguments whose spec field keeps a path under the home folder ("~/...": data.train, data.eval,
# training.graph_json), which model.py writes as os.path.expanduser("~/...") again.
HOME_ARGS = frozenset({("DataReaderParams", "source"), ("DataReaderParams", "eval_source"),
                       ("Model.graph_to_json", "graph_config_file")})

_VERSION = [None]   # the release being imported (positional names depend on it)


Refusal = Located  # old name (codegen.errors.Located: message, line, fix), kept for a transition


@dataclass
class Imported:
    spec: dict
    features: Features
    assumptions: list[tuple[int | None, str]] = field(default_factory=list)


def kwargs_of(call: Call, version: str | None = None) -> dict:
    names = param_names(call.func, version or _VERSION[0])
    out: dict = {}
    if call.args:
        if names is None and (version or _VERSION[0]):
            from ..hugectr import api

            try:
                absent = api.missing(call.func, version or _VERSION[0])
            except api.ApiError:
                absent = None
            if absent:
                raise Refusal(f"hugectr.{absent}", call.line, "remove the call or target a release that has it")
        if names is not None and len(call.args) > len(names):
            _positionals_past_the_signature(call, names, version or _VERSION[0])
        if names is None or len(call.args) > len(names):
            raise Refusal(f"hugectr.{call.func} with {len(call.args)} positional argument(s) cannot be read",
                          call.line, "pass the arguments by keyword")
        out.update(zip(names, call.args))
    for k, v in call.kwargs:
        if k in out:
            raise Refusal(f"hugectr.{call.func}: argument {k!r} given twice", call.line)
        out[k] = v
    return out


def _positionals_past_the_signature(call: Call, names: tuple, release: str | None) -> None:
    """More positional arguments than ``release``'s signature has: where another release's signature starts with the
    same parameters and has more, the cause is the argument this release lacks (named as with keywords)."""
    from ..hugectr import api

    if release is None:
        return
    for other in reversed(api.RELEASES):
        longer = param_names(call.func, other) or ()
        if len(longer) >= len(call.args) and longer[:len(names)] == names:
            absent = api.missing(call.func, release, longer[len(names)])
            if absent:
                raise Refusal(f"hugectr.{call.func} is given {len(call.args)} positional arguments: {absent}",
                              call.line, "target a release that has it, or remove the argument")
            return
    # Another release's signature of that length whose extra parameters sit mid-way (HybridEmbeddingParam's two
    # precompute flags of 3.3 to 3.9): the cause is the first of them this release lacks.
    for other in reversed(api.RELEASES):
        longer = param_names(call.func, other) or ()
        extra = [p for p in longer if p not in names]
        absent = api.missing(call.func, release, extra[0]) if len(longer) == len(call.args) and extra else None
        if absent:
            raise Refusal(f"hugectr.{call.func} is given {len(call.args)} positional arguments, the signature of "
                          f"HugeCTR {other}: {absent}", call.line, "target a release that has it, or remove the argument")


def loop_refusal(line: int, funcs: list[str], why: str) -> Located:
    """A loop of unknown length that makes hugectr calls, named by what it does: building the model (layers added
    in it, no other Model method) or training (a low-level training loop)."""
    builds = bool(funcs) and all(f == "Model.add" or not f.startswith("Model.") for f in funcs)
    reason = f" ({why})" if why else ""
    if builds:
        return Refusal(f"layers are added in a loop whose length cannot be known statically{reason}", line,
                       "pass the value the loop's length comes from with --args, or write it as a literal")
    return Refusal(f"hugectr calls inside a loop of unknown length (a low-level training loop){reason} have no spec "
                   "field", line, "use model.fit(...), or import the graph JSON it writes")


def spec_value(v: object, call: Call, name: str) -> object:
    """A call's argument value -> the spec's YAML value (enums as "Type.Member")."""
    if isinstance(v, HomePath) and (call.func, name) in HOME_ARGS:
        return v.spec
    if isinstance(v, Unknown):
        raise unknown_refusal(v, call, name)
    if isinstance(v, Enum):
        return f"{v.type}.{v.member}"
    if isinstance(v, Call) and v.func.split(".")[-1][:1].isupper() and not v.func.startswith("Model."):
        # A value object (AsyncParam, HybridEmbeddingParam, ...): {"hugectr.AsyncParam": {its arguments}}.
        return {f"hugectr.{v.func}": {k: spec_value(x, v, k) for k, x in kwargs_of(v).items()}}
    if isinstance(v, (Call, Obj)):
        raise Refusal(f"hugectr.{call.func}({name}={value_repr(v)}): object arguments have no spec field",
                      call.line)
    if isinstance(v, tuple):
        return [spec_value(x, call, name) for x in v]
    if isinstance(v, list):
        return [spec_value(x, call, name) for x in v]
    if isinstance(v, dict):
        return {str(spec_value(k, call, name)): spec_value(x, call, name) for k, x in v.items()}
    if isinstance(v, float) and v.is_integer() and False:
        return v
    return v


def unknown_refusal(v: Unknown, call: Call, name: str) -> Located:
    """The one line for a value the reader cannot know that would feed hugectr argument ``name``."""
    why = f": {v.why}" if v.why else ""
    fix = ("pass it on the command line with --args" if "command-line" in v.why or "--" in v.text[:2] else
           "write the value as a literal (or pass it with --args where the script reads it from its command line)")
    return Refusal(f"hugectr.{call.func}({name}=...): {v.text!r} cannot be known without running the script{why}",
                   v.line or call.line, fix, col=v.col if v.line else None)


def unknown_arguments(script: Script) -> list[Located]:
    """Every hugectr argument of the script the reader cannot know, one refusal each (for reporting all at once)."""
    out = []
    for call in script.all_calls:
        names = param_names(call.func, _VERSION[0]) or ()
        for name, v in [*zip(names, call.args), *call.kwargs]:
            u = first_unknown(v, home=(call.func, name) in HOME_ARGS)
            if u is not None and call.func.split(".")[-1] not in DATA_CALLS:
                out.append(unknown_refusal(u, call, name))
    return out


# Calls whose arguments are data the script passes at run time (not model facts): never refused for an unknown.
DATA_CALLS = frozenset({"predict", "evaluate", "check_out_tensor", "lookup", "lookup_fromdlpack"})


def compiled_once_fit(fits: list) -> bool:
    return bool(fits)


def _enum_member(v: object, type_: str, call: Call, name: str) -> str:
    if isinstance(v, Enum) and v.type == type_:
        return v.member
    if isinstance(v, Unknown):
        raise unknown_refusal(v, call, name)
    raise Refusal(f"hugectr.{call.func}({name}={value_repr(v)}): expected a hugectr.{type_} member", call.line)


def _required(func: str, arg: str, release: str) -> bool:
    from ..hugectr import api

    try:
        return any(p.name == arg and p.required for p in api.signature(func, release))
    except api.ApiError:
        return False


def _as_model(script: Script) -> bool:
    """A ModelPerfExt script read as a Model script (same arguments and methods); True when it was one."""
    perf = False
    for c in script.all_calls:
        head, dot, rest = c.func.partition(".")
        if head == "ModelPerfExt":
            c.func, perf = "Model" + dot + rest, True
    return perf

