"""`ctrgen query`'s raw rows as `ctrgen etl` reads them, in-process against an ensemble's inputs (no server): a CSV
list column split on the spec's etl.inputs.multi_hot separator (an empty field an empty list, empty items dropped),
missing values as the workflow takes them (NaN in a float column, an empty list in a list column) in CSV, Parquet
and JSON (null), and the refusals of what a Triton request cannot carry. The served path is tests/test_serve.py's."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from click.testing import CliRunner

from codegen.cli import main
from codegen.errors import UserError
from codegen.serve.cli_query import list_separators
from codegen.serve.query import Ensemble, read_rows, request_tensors, typed_frame
from conftest import REPO

# The ensemble of a workflow reading user (int64), price (float, FillMissing) and tags (a list of text ids).
INPUTS = {"user": "INT64", "price": "FP32", "tags": "BYTES", "tags__lengths": "INT32"}
CSV = "user;price;tags;other\n7;2.5;a|b;x\n8;;;y\n9;1e-3;||c|;z\n"


def ensemble() -> Ensemble:
    return Ensemble("ens", dict(INPUTS), ("click",), 64)


def sent(path, seps=None, sep=None) -> dict:
    """The request's tensors; the typed frame (what --compare's offline workflow reads) keeps a text list as text."""
    ens = ensemble()
    frame = typed_frame(read_rows(path, ens.columns, None, sep), ens, path, seps)
    if path.suffix != ".parquet":
        assert [list(v) for v in frame["tags"]] == [["a", "b"], [], ["c"]]
    return request_tensors(frame, ens, path)


def check_three_rows(tensors: dict) -> None:
    assert tensors["user"].ravel().tolist() == [7, 8, 9]
    price = tensors["price"].ravel().tolist()
    assert price[0] == 2.5 and math.isnan(price[1]) and price[2] == pytest.approx(1e-3)
    assert tensors["tags__lengths"].ravel().tolist() == [2, 0, 1]
    assert tensors["tags"].tolist() == [[b"a", b"b"], [b"", b""], [b"c", b""]]     # padded to the longest list


def test_the_raw_csv_etl_reads_is_sent_with_its_list_column_split(tmp_path):
    data = tmp_path / "raw.csv"
    data.write_text(CSV)
    check_three_rows(sent(data, {"tags": "|"}, ";"))
    # Without the separator a list column's text is refused with the ways to give it.
    with pytest.raises(UserError) as exc:
        sent(data, {}, ";")
    assert "tags: tags is a list column: its CSV text needs the separator etl splits it on" in exc.value.format()
    assert "--spec SPEC (its etl.inputs.multi_hot) or --list-sep tags=SEP" in exc.value.format()


def test_json_null_and_parquet_null_are_missing_values(tmp_path):
    rows = [{"user": 7, "price": 2.5, "tags": ["a", "b"]}, {"user": 8, "price": None, "tags": None},
            {"user": 9, "price": 0.001, "tags": ["c"], "ignored": True}]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check_three_rows(sent(tmp_path / "rows.json"))
    check_three_rows(sent(tmp_path / "rows.jsonl"))
    pd.DataFrame({"user": [7, 8, 9], "price": [2.5, None, 1e-3],
                  "tags": [["a", "b"], None, ["c"]]}).to_parquet(tmp_path / "rows.parquet")
    check_three_rows(sent(tmp_path / "rows.parquet"))


@pytest.mark.parametrize("row, needle", [
    ({"user": None, "price": 1.0, "tags": []}, "user: row 1 is null, and an input of type INT64 cannot carry a null"),
    ({"user": True, "price": 1.0, "tags": []}, "user: row 1: 'True' is true/false, not a number"),
    ({"user": 1.5, "price": 1.0, "tags": []}, "user: row 1: '1.5' is not a whole number"),
    ({"user": 1, "price": 1.0, "tags": "a|b"}, "tags: tags is a list column"),
    ({"user": 1, "price": 1.0, "tags": ["a", None]}, "tags: row 1 is null"),
    ({"user": 1, "price": 1.0, "tags": 5}, "tags: row 1: a int is not a list"),
    ({"price": 1.0, "tags": []}, "user: row 1 has no 'user'"),
], ids=["null_int", "true_int", "fraction", "text_list", "null_item", "number_list", "no_key"])
def test_what_a_request_cannot_carry_is_refused_naming_the_row(tmp_path, row, needle):
    data = tmp_path / "rows.json"
    data.write_text(json.dumps([{"user": 1, "price": 1.0, "tags": []}, row]))
    with pytest.raises(UserError) as exc:
        sent(data)
    assert needle in exc.value.format() and str(data) in exc.value.format()


def test_the_separators_come_from_the_specs_etl_and_list_sep_wins(tmp_path):
    spec = tmp_path / "s.yaml"
    text = (REPO / "specs" / "movielens_genres.yaml").read_text()
    spec.write_text(text.replace("    columns: {userId: int64, movieId: int64, rating: float64, timestamp: int64}",
                                 "    columns: {userId: int64, movieId: int64, rating: float64, timestamp: int64, "
                                 "tags: str}\n    multi_hot: {tags: \";\"}\n    sep: \"\\t\""))
    assert list_separators(spec, ()) == ({"tags": ";"}, "\t")
    assert list_separators(spec, ("tags=|", "more=,")) == ({"tags": "|", "more": ","}, "\t")
    with pytest.raises(UserError) as exc:
        list_separators(None, ("tags",))
    assert "--list-sep: not COLUMN=SEP" in exc.value.format()
    result = CliRunner().invoke(main, ["query", "127.0.0.1:1", "--data", str(spec), "--sep", "ab"])
    assert result.exit_code == 2 and "--sep: not one character" in result.output
