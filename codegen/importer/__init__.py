"""``ctrgen import``: a HugeCTR script, notebook or graph JSON -> a spec and its features lock.

A second front end onto the spec model: the source is read statically (:mod:`.calls`, never imported or run), its
hugectr calls are mapped onto spec fields (:mod:`.to_spec`), and the result is validated by the same loader and
builder that ``ctrgen generate`` uses before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import Located, Problem, UserError, sort_problems
from .calls import extract
from .modules import Modules
from .source import Unit, kind_of, notebook_units, read_text
from .to_spec import ImportState, Imported, run, unknown_arguments
from .result import _NAME, MAX_NAME, ImportResult, _fail, _finish, default_name, name_note  # noqa: F401


def import_source(path: Path, hugectr_version: str | None = None, name: str | None = None,
                  argv: list[str] | None = None) -> ImportResult:
    """Read ``path`` and return the spec text and features; raises :class:`UserError` (one line) on refusal.

    ``argv`` is the command line the script runs with (argparse arguments and ``sys.argv`` then have its values);
    without it, a notebook's ``%%writefile NAME.py`` cell takes the command line of the notebook's first run of
    ``NAME.py``, and everything else its argparse defaults."""
    try:
        text = read_text(path)
        kind = kind_of(path, text)
    except Located as exc:
        raise _fail(path, exc.message, exc.line, exc.fix) from None
    if name is not None and not _NAME.match(name):
        raise UserError([Problem(str(path), f"--name {name!r} is not a valid identifier", "name", None, None,
                                 "use letters, digits and '_' only, not starting with a digit")])
    if name is not None and len(name) > MAX_NAME:
        raise UserError([Problem(str(path), f"--name is {len(name)} characters; a model name has at most {MAX_NAME}",
                                 "name", None, None, f"pass a --name of at most {MAX_NAME} characters")])
    if kind == "graph_json":
        if argv is not None:
            raise UserError([Problem(str(path), "--args applies to a script or notebook, not to a graph JSON",
                                     "args", None, None, "leave out --args")])
        from .graph_json import import_graph_json
        return import_graph_json(path, text, hugectr_version, name)
    if hugectr_version is None:
        raise UserError([Problem(str(path), "the HugeCTR release cannot be read from a script", "hugectr_version",
                                 None, None, "pass --hugectr-version, e.g. --hugectr-version 23.06")])
    units = [Unit(text, path.name)] if kind == "script" else _notebook(path, text)
    modules = Modules(path.parent, {u.written.lstrip("./"): u.text for u in units if u.written}, path)
    found, first_error, argvs, why_unwritten, unfollowed = _read_units(path, text, kind, units, argv, modules)
    if not found:
        if first_error is not None:
            raise first_error
        classes = [u for unit in units for u in _unread(unit)]
        if classes:
            line, what = classes[0]
            raise _fail(path, f"the model is built inside {what}, which the module never instantiates statically "
                              "(ctrgen reads a class's methods where the module creates it and calls them)", line,
                        "create the object and call its methods at module level or in __main__")
        if why_unwritten:
            name, (line, why) = why_unwritten[0]
            raise _fail(path, f"the notebook writes {name} with open().write() and runs it, but the text it writes "
                              f"cannot be known statically: {why}", line,
                        "write the script with a %%writefile cell, or from a string literal", units[-1])
        if unfollowed:
            unit, line, mod = unfollowed[0]
            where = unit.where(line)
            raise _fail(path, f"no hugectr.Model(...) is built here; the script imports module {mod} (line {line}"
                              f"{', ' + where if where else ''}), which is not beside it, so its functions are not "
                              "read", line, f"import the script from the folder that holds {mod.replace('.', '/')}.py, "
                                            f"or put {mod.replace('.', '/')}.py beside the script", None)
        raise _fail(path, "no hugectr.Model(...) is built here", None,
                    "give the script or notebook that builds and trains the model")
    if len(found) > 1:
        names = ", ".join(u.name for u, _ in found)
        raise _fail(path, f"{len(found)} parts build a model ({names}); import takes one model per file", None,
                    "split the notebook, or import the written script")
    unit, script = found[0]
    if argv and not script.argv_read:
        raise _fail(path, "--args given, but the script reads no command line (no argparse parse_args, no sys.argv)",
                    None, "leave out --args", unit if kind != "script" else None)
    label = path.name if kind == "script" else f"{path.name} {unit.name}"
    state = ImportState(script, hugectr_version, name or default_name(path), label)
    try:
        imported: Imported = run(state)
    except Located as exc:
        fix = exc.fix
        if script.required_args and argv is None:
            # argparse would stop the script here too: say which command-line arguments it needs
            fix = (f"the script requires {', '.join(script.required_args)} on its command line: pass {'it' if len(script.required_args) == 1 else 'them'} with "
                   f"--args, e.g. --args \"{script.required_args[0]} VALUE\"")
        where = unit if kind != "script" else None
        first = _fail(path, exc.message, exc.line, fix, where, exc.col)
        # All problems at once, sorted: every call with no spec field the mapper met before it stopped, and every
        # argument the reader cannot know, not only the first.
        others = [u for u in state.unmapped if u is not exc]
        if "cannot be known without running the script" in exc.message:
            others += unknown_arguments(script)
        if not others:
            raise first from None
        problems = list(first.problems)
        for other in others:
            problems += _fail(path, other.message, other.line, other.fix, where, other.col).problems
        raise UserError(sort_problems(problems)) from None
    notes = [f"line {line}: {what}" if line else what for line, what in [*script.notes, *imported.assumptions]]
    if note := name_note(path, name):
        notes.insert(0, note)
    return _finish(path, imported, label, notes, (unit.text, argvs[id(unit)], modules))


def _read_units(path: Path, text: str, kind: str, units: list[Unit], argv: list[str] | None, modules: Modules):
    """Read every unit; a script the notebook's code cells write with open().write() and run is one more unit.
    Returns the units that build a model (with their script), the first refusal, each unit's command line, and the
    written-and-run scripts whose text is unknown (name, (line, why))."""
    found: list[tuple[Unit, object]] = []
    first_error: UserError | None = None
    runs = None
    argvs: dict[int, list[str] | None] = {}
    unwritten: list[tuple[str, tuple[int, str]]] = []
    unfollowed: list[tuple[Unit, int, str]] = []
    pending = list(units)
    while pending:
        unit = pending.pop(0)
        if argv is None and kind != "script" and runs is None:
            from .argv import NotebookRuns

            runs = NotebookRuns(text)       # read once for all units (once per unit is quadratic)
        unit_argv, note = (argv, "") if runs is None else notebook_argv(text, unit, runs)
        argvs[id(unit)] = unit_argv
        try:
            script = extract(unit.text, str(path), unit_argv, modules)
            if note:
                script.notes.insert(0, (0, note))
        except Located as exc:
            if kind == "script":
                raise _fail(path, exc.message, exc.line, exc.fix, col=exc.col) from None
            first_error = first_error or _fail(path, exc.message, exc.line, exc.fix, unit=unit, col=exc.col)
            continue
        if script.count("Model") + script.count("ModelPerfExt"):
            found.append((unit, script))
        unfollowed += [(unit, line, mod) for line, mod in script.unfollowed]
        if kind != "script" and not unit.written:
            from .argv import NotebookRuns

            index = runs or NotebookRuns(text)
            for name, written in script.written.items():
                if not index.of(name.lstrip("./")):
                    continue            # written, never run: not the training script
                if written is None:
                    unwritten.append((name, script.written_why[name]))
                    continue
                cell = unit.where(script.written_at.get(name)).split(",")[0]
                pending.append(Unit(written, f"{cell or 'cells'} (open({name!r}, 'w').write)", (), name))
    # A %%writefile module another part imports is that part's code, not a model of its own.
    imported = {v[0] for v in modules.cache.values() if v}
    found = [(u, sc) for u, sc in found if u.written.lstrip("./") not in imported]
    return found, first_error, argvs, unwritten, unfollowed


def notebook_argv(notebook_text: str, unit: Unit, index=None) -> tuple[list[str] | None, str]:
    """The command line of the notebook's first run of the file a ``%%writefile`` unit writes, and a note saying so
    (``index``: the notebook's :class:`~.argv.NotebookRuns`, read once by the caller)."""
    from .argv import NotebookRuns, describe

    if not unit.written:
        return None, ""
    runs = (index or NotebookRuns(notebook_text)).of(unit.written.lstrip("./"))
    if not runs:
        return None, ""
    cell, first = runs[0]
    note = f"command line of {unit.written}: {describe(first)}, from the notebook's cell {cell}"
    others = {tuple(a) for _, a in runs} - {tuple(first)}
    if others:
        note += f" (the first of its {len(others) + 1} different runs in the notebook; pass --args for another)"
    return first, note


def _unread(unit: Unit) -> list[tuple[int, str]]:
    try:
        return extract(unit.text, unit.name).unread
    except Located:
        return []


def _notebook(path: Path, text: str) -> list[Unit]:
    try:
        units = notebook_units(text)
    except Located as exc:
        raise _fail(path, exc.message, exc.line, exc.fix) from None
    if not units:
        raise _fail(path, "the notebook has no code cells")
    return units


