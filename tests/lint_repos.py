"""The lint cases as Triton model repositories the tests write themselves, from tests/facts/lint_cases.json.

Each case reproduces a repository of NVIDIA's official notebooks (or, for ``clean_movielens_onehot``, a consistent
one): config.pbtxt written from its protobuf values, ps.json and the graph JSON from their data, every weight file
as zero bytes of the size the case gives (the validator reads sizes only). The case's ``expect`` lines are the
defects a correct validator reports (docs/triton_facts.md "Lint cases"); ``may_also`` names the fields that may be
reported as warnings. The reference tier (tests/test_validate.py) checks that each written repository validates
exactly as the upstream folder does.
"""

from __future__ import annotations

import json
from pathlib import Path

from upstream import table

CLEAN = "clean_movielens_onehot"


def cases() -> list[str]:
    return sorted(table("lint_cases"))


def case(name: str) -> dict:
    return table("lint_cases")[name]


def write_case(name: str, dest: Path) -> Path:
    """Write case ``name`` as a repository at ``dest`` (created; must not exist) and return ``dest``."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc

    dest.mkdir(parents=True)
    for rel, fact in case(name)["files"].items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if "config" in fact:
            message = json_format.ParseDict(fact["config"], mc.ModelConfig())
            path.write_text(text_format.MessageToString(message), encoding="utf-8")
        elif "json" in fact:
            path.write_text(json.dumps(fact["json"], indent=4) + "\n", encoding="utf-8")
        else:
            path.write_bytes(bytes(fact["size"]))
    return dest
