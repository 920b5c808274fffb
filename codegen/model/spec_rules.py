"""Spec rules that need the spec and its features together, run by the model builder before the HugeCTR job is
built: each was a traceback or a silently wrong output for a hostile spec (issue 28). Every problem is reported at
once, on the spec's line.

- ``input.sparse[].columns``: an empty list, or a name that is not one of the spec's categorical columns;
- ``name``: a graph JSON ``<name>.json`` that would be one of the other files generated beside it (MANIFEST.json,
  features.json of the torch target; compared ignoring case, as a macOS or Windows checkout does);
- ``solver.vvgpu``: a GPU listed twice in one node's row (HugeCTR would count it twice: a doubled
  ``max_vocabulary_size_global``), for every target.
"""

from __future__ import annotations

from ..errors import Problem, Problems, UserError, field_path
from ..features import Features
from ..specfile.load import LoadedSpec


def check_spec_rules(loaded: LoadedSpec, features: Features) -> None:
    """Raise one UserError with every problem these rules find in ``loaded``'s spec read with ``features``."""
    report(loaded, [*_sparse_columns(loaded, features), *_name(loaded), *_vvgpu(loaded)])


def report(loaded: LoadedSpec, found: list[tuple[tuple, str, str]]) -> None:
    """Raise one UserError with every (spec location, message, fix) of ``found``, each on its spec line, sorted."""
    problems = Problems()
    for loc, message, fix in found:
        line, col = loaded.where(*loc)
        problems.items.append(Problem(str(loaded.path), message, field_path(loc), line, col, fix))
    if problems:
        raise UserError(problems.sorted())


def _sparse_columns(loaded: LoadedSpec, features: Features) -> list[tuple[tuple, str, str]]:
    spec = loaded.spec
    names = list(spec.features.categorical or [c.name for c in features.categorical])
    out: list[tuple[tuple, str, str]] = []
    for i, si in enumerate(spec.input.sparse):
        if si.columns is None:
            continue
        if not si.columns:
            out.append((("input", "sparse", i, "columns"), "is empty: a sparse input reads at least one column",
                        f"list its columns (a contiguous run of {names}), or leave columns out on the last input"))
        for j, n in enumerate(si.columns):
            if n not in names:
                out.append((("input", "sparse", i, "columns", j), f"{n!r} is not a categorical column of the spec",
                            f"use one of {names}"))
    return out


def _name(loaded: LoadedSpec) -> list[tuple[tuple, str, str]]:
    from ..runtime.contract import FEATURES_FILE, MANIFEST

    graph_json = f"{loaded.spec.name}.json"
    others = (MANIFEST, FEATURES_FILE) if "torch" in loaded.spec.targets else (MANIFEST,)
    taken = [f for f in others if f.casefold() == graph_json.casefold()]
    if not taken:
        return []
    return [(("name",), f"the graph JSON {graph_json} would be the generated {taken[0]} of the same folder",
             "choose another name")]


def _vvgpu(loaded: LoadedSpec) -> list[tuple[tuple, str, str]]:
    out: list[tuple[tuple, str, str]] = []
    for node, row in enumerate(loaded.spec.solver.vvgpu):
        twice = sorted({g for g in row if row.count(g) > 1})
        if twice:
            out.append((("solver", "vvgpu", node), f"GPU {twice[0]} is listed twice on node {node}: HugeCTR would "
                        "count it as two GPUs", "list each GPU of a node once"))
    return out
