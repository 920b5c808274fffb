"""Load a spec file: YAML (round-trip, to keep line numbers) -> validated :class:`Spec`.

Every error names the file, the line and column of the offending node and the dotted field path; all validation
errors of a file are reported together, sorted by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from ..errors import Problem, UserError
from .model import Spec


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: Path          # as given by the user (used in messages)
    text: str           # the exact file content (hashed into generated headers)
    tree: Any           # ruamel round-trip tree, for line numbers of later semantic errors

    def where(self, *loc: str | int) -> tuple[int | None, int | None]:
        """(line, col), 1-based, of the node at ``loc`` (or the closest existing parent)."""
        return locate(self.tree, loc)

    def error(self, loc: tuple[str | int, ...], message: str, fix: str = "") -> UserError:
        line, col = self.where(*loc)
        return UserError([Problem(str(self.path), message, _dotted(loc), line, col, fix)])


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


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


def _message(err: dict) -> str:
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "missing":
        return "field required"
    if err["type"] in ("literal_error", "enum"):
        return msg.replace("Input should be", "must be")
    return msg


def _fix(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "remove it or check its spelling ('ctrgen schema' lists the fields)"
    if err["type"] == "string_pattern_mismatch":
        return "use letters, digits and '_' only, not starting with a digit"
    return ""


def load_spec(path: Path, text: str | None = None) -> LoadedSpec:
    """Load ``path`` (or ``text`` as if it were the content of ``path``)."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError.one(path, "spec file not found", fix="check the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError.one(path, f"cannot read spec: {exc}") from None
    yaml = YAML(typ="rt")
    try:
        tree = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise UserError.one(path, f"invalid YAML: {exc.problem}", line=mark.line + 1 if mark else None,
                            col=mark.column + 1 if mark else None) from None
    if not isinstance(tree, CommentedMap):
        raise UserError.one(path, "a spec must be a YAML mapping (name:, hugectr_version:, data:, model:, ...)")
    try:
        spec = Spec.model_validate(_plain(tree))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            # Discriminated unions add the tag to the location ("model.mlp.units"); drop it for the YAML lookup.
            yaml_loc = tuple(p for i, p in enumerate(loc) if not (i == 1 and loc[0] == "model" and p in ("mlp", "layers", "wdl", "dcn", "dlrm", "deepfm")))
            yaml_loc = tuple(p for p in yaml_loc if p not in ("int", "list[int]", "list[constrained-int]"))
            line, col = locate(tree, yaml_loc)
            problems.append(Problem(str(path), _message(err), _dotted(yaml_loc), line, col, _fix(err)))
        raise UserError(problems) from None
    return LoadedSpec(spec=spec, path=path, text=text, tree=tree)


def _plain(node: Any) -> Any:
    """ruamel containers -> plain dicts/lists (pydantic would otherwise see ordered subclasses)."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node
