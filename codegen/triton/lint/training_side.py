"""The training side a hugectr model is checked against: the graph JSON named by the ``config`` parameter or ps.json
``network_file`` (triton.md §2.2, §5), else the features lock; and how paths named in the files are resolved and
reported."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...errors import Located, UserError
from .context import Context
from .findings import ERROR, WARNING
from ...hugectr.graph_reader import Graph, load_graph
from .modelconfig import ConfigFile
from .params import Params
from .psentry import PsEntry
from .psjson import show


@dataclass(frozen=True)
class Truth:
    """The training side's counts: from the graph JSON, else from the features lock."""

    source: str
    slots: int
    dense_dim: int
    label_dim: int


def locate_graph(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None) -> Graph | None:
    """The graph JSON named by the ``config`` parameter or ps.json ``network_file`` (triton.md §2.2, §5)."""
    found = []
    if "config" in params:
        r = resolve_named(ctx, "config", params["config"], [cfg.repo_root, ctx.root], cfg=cfg)
        if r is not None:
            found.append(("config", r))
    if ps is not None and isinstance(ps.raw("network_file"), str):
        r = resolve_named(ctx, "network_file", ps.raw("network_file"),
                          [cfg.repo_root, ctx.root, ps.file.path.parent], ps=ps)
        if r is not None:
            found.append(("network_file", r))
    if len(found) == 2 and found[0][1].resolve() != found[1][1].resolve():
        ctx.add_cfg(cfg, "config", f"{show(params['config'])} names {ctx.show_path(found[0][1])} but "
                f"network_file of {ps.where()} names {ctx.show_path(found[1][1])} (triton.md §5: config == "
                "network_file)", "point both at the same graph JSON", param=True,
                actual=params["config"], expected=ps.raw("network_file"))
    if not found:
        found = _mounted_copy(ctx, cfg, params, ps)
    if not found:
        return None
    path = found[0][1]
    try:
        # The shared reader (ctrgen import's too), lenient as hand-written graphs need: read as every input is
        # (regular, bounded, UTF-8, nesting checked) before it is parsed.
        return load_graph(path)
    except Located as exc:      # what the graph says: its field and line
        ctx.add(path, exc.field, exc.message, "regenerate it with Model.graph_to_json (hugectr.md §2)",
                line=exc.line, col=exc.col)
    except UserError as exc:    # a file that cannot be read as a graph JSON (a FIFO, too large, too deep)
        ctx.add(path, "config", exc.problems[0].message, exc.problems[0].fix, line=exc.problems[0].line,
                col=exc.problems[0].col)
    except OSError as exc:
        ctx.add(path, "config", f"cannot read the graph JSON: {exc.strerror}")
    return None


def _mounted_copy(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None) -> list[tuple[str, Path]]:
    """Without --root-map, an absolute graph path (``/model/NAME/1/NAME.json``) is usually the repository itself
    mounted at the model root: the longest tail of the path that exists in the repository is checked in its place,
    so a broken graph JSON is reported even then."""
    names = [("config", params.get("config"))]
    if ps is not None:
        names.append(("network_file", ps.raw("network_file")))
    for field, given in names:
        if not isinstance(given, str) or not PurePosixPath(given).is_absolute():
            continue
        r = ctx.resolver.resolve(given, [cfg.repo_root, ctx.root])
        if not r.unmapped:
            continue
        parts = PurePosixPath(given).parts[1:]
        for i in range(len(parts) - 1):
            for root in (cfg.repo_root, ctx.root):
                candidate = ctx.resolver.stored(root.joinpath(*parts[i:]))
                # a FIFO or device too: refused when read
                if candidate is not None and os.path.lexists(candidate) and not candidate.is_dir():
                    return [(field, candidate)]
    return []


def resolve_named(ctx: Context, field: str, given: str, bases: list[Path], *, cfg: ConfigFile | None = None,
                  ps: PsEntry | None = None) -> Path | None:
    """Resolve a path that config.pbtxt (cfg) or ps.json (ps) names; report it when it is empty, missing or cannot
    be checked here. Returns the local path when it exists."""
    def add(message: str, fix: str, severity: str = ERROR) -> None:
        if cfg is not None:
            ctx.add_cfg(cfg, field, message, fix, param=True, severity=severity, actual=given)
        else:
            ps.add(field, message, fix, severity=severity, actual=given)

    if not given:
        add("empty path", "name the file (a path as the server sees it)")
        return None
    r = ctx.resolver.resolve(given, bases)
    if r.unmapped:
        add(f"{show(given)} is an absolute path that is not on this machine; it was not checked",
            f"pass --root-map /{given.split('/')[1]}=<local folder> to check it", WARNING)
        return None
    if not r.exists:
        add(f"{show(given)} not found (looked for {r.path})",
            "fix the path or --root-map (triton.md §4, R17)" if PurePosixPath(given).is_absolute() else
            "fix the path: relative paths are read from the repository root (triton.md §5, R17)")
        return None
    return r.path


def truth_of(ctx: Context, graph: Graph | None) -> Truth | None:
    if graph is not None:
        return Truth(f"the graph {ctx.show_path(graph.path)}", graph.slots, graph.dense_dim, graph.label_dim)
    if ctx.lock is not None:
        lock = ctx.lock
        return Truth(f"the features lock {ctx.show_path(ctx.lock_path)}", len(lock.categorical),
                     len(lock.continuous), len(lock.labels))
    return None
