"""The spec's nesting cap is checked on libyaml's tokens before the round-trip reader runs (codegen/inputs.py
check_yaml_nesting): the reader's time grows with the square of the depth of nested flow collections, so a deep
document (up to the 1 MiB spec limit of `[`) is refused at once, with the position of the first token past the cap,
and the cap's boundary is the tree check's (64 levels pass, 65 are refused; flow and block collections)."""

from __future__ import annotations

import pytest

from codegen.errors import UserError
from codegen.inputs import MAX_YAML_DEPTH, MAX_SPEC_BYTES, check_yaml_nesting, check_yaml_tree
from codegen.specfile.load import load_spec


def flow(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def block(depth: int) -> str:
    """`depth` nested block mappings (the document's own mapping included)."""
    return "".join("  " * i + f"k{i}:\n" for i in range(depth - 1)) + "  " * (depth - 1) + "leaf: 1\n"


@pytest.mark.parametrize("text", [flow, block])
def test_the_token_scan_refuses_exactly_what_the_tree_check_refuses(text):
    from ruamel.yaml import YAML

    # flow(n) is n + 1 collections deep (the document's mapping and n lists); block(n) is n deep.
    ok, too_deep = (MAX_YAML_DEPTH - 1, MAX_YAML_DEPTH) if text is flow else (MAX_YAML_DEPTH, MAX_YAML_DEPTH + 1)
    check_yaml_tree(YAML(typ="rt").load(text(ok)), "x.yaml")
    check_yaml_nesting(text(ok), "x.yaml")
    with pytest.raises(UserError, match="nested more than 64 levels deep"):
        check_yaml_tree(YAML(typ="rt").load(text(too_deep)), "x.yaml")
    with pytest.raises(UserError, match="nested more than 64 levels deep") as exc:
        check_yaml_nesting(text(too_deep), "x.yaml")
    problem = exc.value.problems[0]
    # The 65th collection's opening token: column 3 + 64 of line 1 ([), or the start of line 65's mapping.
    assert (problem.line, problem.col) == ((1, 4 + MAX_YAML_DEPTH - 1) if text is flow else (MAX_YAML_DEPTH + 1,
                                                                                             2 * MAX_YAML_DEPTH + 1))


def test_a_spec_of_one_mebibyte_of_brackets_is_refused_without_parsing_it(tmp_path):
    text = flow((MAX_SPEC_BYTES - 5) // 2)
    assert len(text) <= MAX_SPEC_BYTES
    with pytest.raises(UserError) as exc:
        load_spec(tmp_path / "deep.yaml", text)
    assert exc.value.format().startswith(f"{tmp_path / 'deep.yaml'}:1:67: ")
