"""Load a spec file: YAML (round-trip, to keep line numbers) -> validated :class:`Spec`.

Every error names the file, the line and column of the offending node and the dotted field path; all validation
errors of a file are reported together, sorted by position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..errors import Problem, UserError, field_path
from ..inputs import (FLT_MAX, INT32_MAX, MAX_SPEC_BYTES, UINT64_MAX, check_yaml_nesting, check_yaml_tree, decode,
                      read_text)
from .model import Spec
from .suggest import unknown_field_fix

_UNPARSED: Any = object()
_FAST_MAX_INDICATORS = 4000


class LoadedSpec:
    """A validated spec with its path (as given by the user, used in messages) and exact text (hashed into generated
    headers). ``tree`` is the ruamel round-trip tree, for line numbers of later semantic errors; a spec read by the
    fast path parses it on first use (a valid spec whose build finds nothing wrong never needs it)."""

    def __init__(self, spec: Spec, path: Path, text: str, tree: Any = _UNPARSED):
        self.spec, self.path, self.text, self._tree = spec, path, text, tree
        self._nodes: Any = None

    @property
    def tree(self) -> Any:
        if self._tree is _UNPARSED:
            self._tree = _round_trip(self.path, self.text)
        return self._tree

    def where(self, *loc: str | int) -> tuple[int | None, int | None]:
        """(line, col), 1-based, of the node at ``loc`` (or the closest existing parent)."""
        if self._tree is _UNPARSED:      # a spec the fast path read: libyaml's nodes carry the same marks, ~6x faster
            if self._nodes is None:
                self._nodes = _nodes(self.text)
            return locate_node(self._nodes, loc)
        return locate(self.tree, loc)

    def error(self, loc: tuple[str | int, ...], message: str, fix: str = "") -> UserError:
        line, col = self.where(*loc)
        return UserError([Problem(str(self.path), message, field_path(loc), line, col, fix)])


def locate(tree: Any, loc: tuple[str | int, ...]) -> tuple[int | None, int | None]:
    node, line, col = tree, None, None
    for key in loc:
        if isinstance(node, CommentedMap) and key in node:
            line, col = node.lc.key(key)
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
            line, col = node.lc.item(key)
            node = node[key]
        else:
            break
    if line is None and hasattr(tree, "lc"):
        return 1, 1
    return (line + 1 if line is not None else None), (col + 1 if col is not None else None)


def _nodes(text: str) -> Any:
    """libyaml's node tree of a text the fast path read (so libyaml parses it: see ``_fast``)."""
    return YAML(typ="safe", pure=False).compose(text)


def locate_node(root: Any, loc: tuple[str | int, ...]) -> tuple[int | None, int | None]:
    """``locate`` over a node tree: a key's mark for a mapping's entry, the item's for a list's (as ruamel's ``lc``)."""
    construct = YAML(typ="safe", pure=False).constructor.construct_object
    node, line, col = root, None, None
    for key in loc:
        if isinstance(node, MappingNode):
            entry = next(((k, v) for k, v in node.value if isinstance(k, ScalarNode) and construct(k) == key), None)
            if entry is None:
                break
            line, col, node = entry[0].start_mark.line, entry[0].start_mark.column, entry[1]
        elif isinstance(node, SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line, col = node.start_mark.line, node.start_mark.column
        else:
            break
    if line is None and isinstance(root, MappingNode):
        return 1, 1
    return (line + 1 if line is not None else None), (col + 1 if col is not None else None)


_TYPE_NAMES = {bool: "a boolean", str: "a string", float: "a float", int: "an integer", type(None): "null",
               list: "a list", dict: "a mapping"}
_CPP_LIMITS = {INT32_MAX: "2**31-1, the C++ int it becomes", UINT64_MAX: "2**64-1, the C++ uint64 it becomes",
               FLT_MAX: "FLT_MAX, the C++ float it becomes"}


def _tag(node: Any) -> str:
    tag = getattr(node, "tag", None)
    return str(getattr(tag, "value", tag))


def _got(value: Any) -> str:
    if isinstance(value, TaggedScalar):
        return f"a value tagged {_tag(value)}"
    for t, name in _TYPE_NAMES.items():
        if isinstance(value, t):
            shown = repr(value) if not isinstance(value, (list, dict)) else ""
            return f"{name} {shown}".strip()
    return type(value).__name__


def _message(err: dict) -> str:
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "value_error":          # a validator's own sentence, without pydantic's prefix
        return msg.removeprefix("Value error, ")
    if err["type"] == "missing":
        return "field required"
    if err["type"] in ("literal_error", "enum"):
        return msg.replace("Input should be", "must be")
    if err["type"] == "too_short":
        n = (err.get("ctx") or {}).get("min_length", 1)
        return f"must have at least {n} item{'s' * (n != 1)}"
    if err["type"] in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, not {_got(err.get('input'))}"
    if err["type"] in ("float_type", "float_parsing"):
        return f"must be a number, not {_got(err.get('input'))}"
    if err["type"] in ("bool_type", "bool_parsing"):
        return f"must be true or false, not {_got(err.get('input'))}"
    if err["type"] == "string_type":
        return f"must be a string, not {_got(err.get('input'))}"
    if err["type"] == "list_type":
        return f"must be a list, not {_got(err.get('input'))}"
    if err["type"] in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping, not {_got(err.get('input'))}"
    if err["type"] in ("less_than_equal", "greater_than_equal", "greater_than", "less_than"):
        bound = (err.get("ctx") or {}).get("le", (err.get("ctx") or {}).get("ge"))
        bound = -bound if isinstance(bound, float) and bound < 0 else bound
        why = f" ({_CPP_LIMITS[bound]})" if bound in _CPP_LIMITS else ""
        return msg.replace("Input should be", "must be") + why + f", got {err.get('input')!r}"
    return msg


def _fix(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "remove it or check its spelling ('ctrgen schema' lists the fields)"
    if err["type"] == "string_pattern_mismatch":
        pattern = str((err.get("ctx") or {}).get("pattern", ""))
        if "\\x00-\\x1f" in pattern:       # free text (paths, column names, separators): no control characters
            return "remove the control character (a tab is allowed as a separator only)"
        if "KB|MB|GB" in pattern:
            return "write a size such as 100MB"
        return "use letters, digits and '_' only, not starting with a digit"
    if err["type"] in ("less_than_equal", "less_than") and (err.get("ctx") or {}).get("le") is not None:
        return f"use at most {err['ctx']['le']}"
    return ""


def load_spec(path: Path, text: str | None = None) -> LoadedSpec:
    """Load ``path`` (or ``text`` as if it were the content of ``path``)."""
    if text is None:
        text = read_text(path, "spec", MAX_SPEC_BYTES)
    else:
        text = decode(text.encode("utf-8", "surrogatepass"), path, "spec")
    # Fast path (issue 16 item 7): libyaml's parser and plain containers, ~7x faster than the round-trip reader. Any
    # doubt (a YAML error, a deep or aliased document) takes the round-trip path below, whose tree gives every
    # message its line; libyaml's node marks give the same lines (test_check_speed) to the fast path's problems, and
    # to a valid spec's later checks (LoadedSpec.where).
    data = _fast(text)
    if data is not None:
        try:
            return LoadedSpec(spec=Spec.model_validate(data), path=path, text=text)
        except ValidationError as exc:
            nodes = _nodes(text)
            raise _invalid(path, exc, lambda loc: locate_node(nodes, loc)) from None
    tree = _round_trip(path, text)
    try:
        spec = Spec.model_validate(_plain(tree))
    except ValidationError as exc:
        raise _invalid(path, exc, lambda loc: locate(tree, loc)) from None
    return LoadedSpec(spec=spec, path=path, text=text, tree=tree)


def _invalid(path: Path, exc: ValidationError, where: Any) -> UserError:
    """Every validation problem of a spec, each at its node's line and column (``where(loc)``)."""
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        # Discriminated unions add the tag to the location ("model.mlp.units"); drop it for the YAML lookup.
        yaml_loc = tuple(p for i, p in enumerate(loc) if not (i == 1 and loc[0] == "model" and p in ("mlp", "layers", "wdl", "dcn", "dlrm", "deepfm")))
        yaml_loc = tuple(p for p in yaml_loc if p not in ("int", "list[int]", "constrained-int",
                                                          "list[constrained-int]"))
        line, col = where(yaml_loc)
        fix = unknown_field_fix(Spec, loc) if err["type"] == "extra_forbidden" else _fix(err)
        problems.append(Problem(str(path), _message(err), field_path(yaml_loc), line, col, fix))
    return UserError(problems)


def _fast(text: str) -> dict | None:
    """The document as plain data when libyaml reads it as a small, alias-free mapping; None otherwise."""
    # libyaml's composer recurses in C, one level per nesting level, with no limit: a document that could nest
    # deeper than a few thousand levels (each level needs one of these characters or a new line) takes the careful
    # path, which refuses it. Merge keys, YAML directives (%YAML 1.1) and explicit tags too: the two readers need
    # not agree on them.
    if sum(text.count(c) for c in "[{-:?") + text.count("\n") > _FAST_MAX_INDICATORS or any(
            mark in text for mark in ("<<", "%YAML", "!!")):
        return None
    try:
        data = YAML(typ="safe", pure=False).load(text)
    except Exception:                                    # any error: reported by the round-trip path
        return None
    if not isinstance(data, dict):
        return None
    try:
        check_yaml_tree(data, "")
    except UserError:
        return None
    return _plain(data)


def _round_trip(path: Path, text: str) -> Any:
    """The ruamel round-trip tree of a spec's text (line and column of every node), after the YAML checks."""
    check_yaml_nesting(text, path)
    yaml = YAML(typ="rt")
    try:
        tree = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise UserError.one(path, f"invalid YAML: {exc.problem}", line=mark.line + 1 if mark else None,
                            col=mark.column + 1 if mark else None) from None
    except YAMLError as exc:   # e.g. a control character the YAML reader refuses
        raise UserError.one(path, f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UserError.one(path, "invalid YAML: nested too deeply", fix="a spec is a few levels of mappings and "
                                                                          "lists") from None
    check_yaml_tree(tree, path)
    if not isinstance(tree, CommentedMap):
        raise UserError.one(path, "a spec must be a YAML mapping (name:, hugectr_version:, data:, model:, ...)")
    return tree


def _plain(node: Any) -> Any:
    """ruamel containers -> plain dicts/lists (pydantic would otherwise see ordered subclasses); a scalar tagged
    ``!!str`` is the string it spells (YAML's standard tag), another tag is left for the field check to name."""
    if isinstance(node, TaggedScalar) and _tag(node) in ("tag:yaml.org,2002:str", "!!str"):
        return str(node.value)
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node
