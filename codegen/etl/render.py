"""Render the ETL plan into etl.py (templates/etl/etl.py.j2). Every value from the spec is a literal made by
codegen.render.literals; operator names and keyword names come from ctrgen's own tables, never from the spec."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..render.env import render
from ..template_files import templates_digest
from ..render.literals import ident, py
from .plan import ClusterPlan, EtlPlan, GroupPlan

READER_TEXT = {"hugectr": "HugeCTR's Parquet reader", "torch": "train_torch.py", "none": "the workflow"}
ROLE_VAR = {"categorical": "cat", "continuous": "cont", "label": "label"}
# Schema tags (merlin Tags values) so that the saved workflow names each column's role (Categorify tags its own
# output). One tag each: merlin keeps tags in a set, whose order in the schema files would follow the hash seed.
TAGS = {"continuous": ("continuous",), "label": ("target",)}


@dataclass(frozen=True)
class Chain:
    var: str
    source: str
    ops: tuple[str, ...]
    comments: tuple[str, ...]
    setup: str = ""                     # a line before the chain (a value it names)

    @property
    def text(self) -> str:
        """``var = source >> op >> op``, one operator per line when that does not fit on one."""
        one = f"    {self.var} = {self.source} >> {' >> '.join(self.ops)}"
        if len(one) <= WIDTH and "\n" not in one:
            return one
        pad = " " * (len(self.var) + 8)
        return f"    {self.var} = (" + self.source + "".join(f"\n{pad}>> {op}" for op in self.ops) + ")"


WIDTH = 116   # generated lines stay within 120 columns (ruff's E501 at the project's width)


def block(value, indent: int = 0, width: int = WIDTH) -> str:
    """py(value), or for a list / dict too long for one line: its items packed into lines under the opening one.

    ``indent`` is the column the literal's first line starts at (continuation lines get indent + 4)."""
    text = py(value)
    if indent + len(text) <= width or not isinstance(value, (list, dict)) or not value:
        return text
    items = [py(v) for v in value] if isinstance(value, list) else [f"{py(k)}: {py(v)}" for k, v in value.items()]
    pad = " " * (indent + 4)
    lines, line = [], ""
    for item in items:
        piece = f"{item},"
        if line and len(pad) + len(line) + 1 + len(piece) > width:
            lines.append(pad + line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(pad + line)
    opening, closing = ("[", "]") if isinstance(value, list) else ("{", "}")
    return opening + "\n" + "\n".join(lines) + "\n" + " " * indent + closing


def _call(name: str, args: tuple[tuple[str, object], ...], extra: str = "") -> str:
    # Prints an NVTabular operator's call with the arguments the spec gave (printing, not reading: what a value means
    # is read from the plan's typed fields, OpStep.comparison and OpStep.limits).
    parts = [f"{ident(k)}={py(v)}" for k, v in args]
    if extra:
        parts.append(extra)
    return f"ops.{ident(name)}({', '.join(parts)})"


def _op(op, group: GroupPlan) -> str:
    if op.name == "Categorify":
        return _call("Categorify", op.args, "out_path=cat_dir")
    if op.name == "LambdaOp":
        c = op.comparison
        assert c is not None
        # compare / dtype are members of fixed sets (the spec's schema); value is a finite number.
        dtype = py(c.dtype)
        # dtype= as well: with a Dask client NVTabular would otherwise record the input's dtype in the schema.
        return f"ops.LambdaOp(lambda col: (col {c.compare} {py(c.value)}).astype({dtype}), dtype={dtype})"
    return _call(op.name, op.args)


def _comments(group: GroupPlan, plan: EtlPlan) -> tuple[str, ...]:
    out = []
    names = [op.name for op in group.ops]
    if group.role == "categorical":
        out.append("Ids from 3 up in order of frequency (0 padding, 1 null, 2 out of vocabulary in NVTabular 23.8).")
        limits = group.ops[0].limits
        if limits and limits.freq_threshold:
            out.append(f"Values seen fewer than {limits.freq_threshold} times in training share the "
                       "out-of-vocabulary id" + (" buckets." if limits.num_buckets else "."))
        if limits and limits.max_size:
            out.append(f"At most {limits.max_size} categories per column are kept, the most frequent.")
        if group.multi_hot:
            out.append(f"{', '.join(group.multi_hot)}: list column(s), every id of a row's list is a key of the "
                       "same slot (multi-hot).")
        if group.joined:
            out.append("Joined columns are categorified with the input's, as seed 001 does.")
    elif group.role == "label" and names == ["LambdaOp"]:
        c = group.ops[0].comparison
        assert c is not None
        out.append(f"The label: {', '.join(group.columns)} {c.compare} {c.value:g} as "
                   f"{c.dtype} (the comparison is written by ctrgen from the spec).")
    elif group.role == "label":
        out.append("The label, tagged as the target.")
    else:
        if "FillMissing" in names:
            out.append("Missing values are filled before anything else reads them.")
        if "Normalize" in names:
            out.append("Normalize: mean and standard deviation of the training rows.")
    return tuple(out)


def etl_context(plan: EtlPlan, *, header: str, name: str) -> dict:
    chains: list[Chain] = []
    outputs: list[str] = []
    for i, x in enumerate(plan.crosses):
        var = f"cross_{i}"
        if x.num_buckets:
            # HashedCross records no domain: the schema gets the bucket count as the cardinality.
            domain = {"domain": {"min": 0, "max": x.num_buckets - 1, "name": x.output},
                      "embedding_sizes": {"cardinality": x.num_buckets, "dimension": 16}}
            setup = f"    domain_{i} = {block(domain, len(f'    domain_{i} = '))}"
            op = (f"ops.HashedCross({py(x.num_buckets)})",
                  f'ops.AddMetadata(tags=["categorical"], properties=domain_{i})')
            comment = (f"{' x '.join(x.columns)} hashed into {x.num_buckets} buckets ({x.output}); collisions are "
                       "possible, unseen pairs still get a bucket.")
        else:
            extra = ", ".join(p for p in (f"freq_threshold={py(x.freq_threshold)}" if x.freq_threshold else "",
                                          'encode_type="combo"', "out_path=cat_dir") if p)
            setup = ""
            op = (f"ops.Categorify({extra})",)
            comment = f"{' x '.join(x.columns)}: one id per pair seen in training ({x.output}), the wide input."
        chains.append(Chain(var, block([list(x.columns)], len(var) + 7), op, (comment,), setup))
        outputs.append(var)
    counts: dict[str, int] = {}
    for g in plan.groups:
        base = ROLE_VAR[g.role]
        var = f"{base}_{counts.get(base, 0)}"
        counts[base] = counts.get(base, 0) + 1
        source = f"joined[{py(list(g.columns))}]" if g.joined else block(list(g.columns), len(var) + 7)
        ops = tuple(_op(op, g) for op in g.ops)
        if g.role in TAGS:
            ops += (f"ops.AddMetadata(tags={py(list(TAGS[g.role]))})",)
        chains.append(Chain(var, source, ops, _comments(g, plan)))
        outputs.append(var)

    join = None
    if plan.join is not None:
        j = plan.join
        joined_cols = [c for g in plan.groups if g.joined for c in g.columns if c in j.columns and c not in j.on]
        left = [c for g in plan.groups if g.joined for c in g.columns if c not in joined_cols]
        left += [k for k in j.on if k not in left]
        join = {
            "file": py(j.path), "format": py(plan.join_format), "sep": py(j.sep),
            "dtypes": block(dict(j.columns), 14),
            "multi_hot": py(dict(j.multi_hot)), "on": py(list(j.on)), "how": py(j.how),
            "left": py(left), "columns_ext": py(list(j.on) + [c for c in dict.fromkeys(joined_cols)]),
            "indent": len(f"    joined = {py(left)} >> ops.JoinExternal("),
        }
    inputs = plan.inputs
    return {
        "header": header,
        "name_text": repr(name),
        "reader_text": READER_TEXT[plan.output.reader],
        "train_files": block(list(plan.train), 14),
        "valid_files": block(list(plan.valid) if plan.valid else None, 14),
        "has_valid": plan.valid is not None,
        "input_format": py(plan.train_format),
        "csv_sep": py(inputs.sep),
        "input_dtypes": block(dict(inputs.columns), 15),
        "multi_hot": block(dict(inputs.multi_hot), 12),
        "drop": block(list(plan.drop), 7),
        "valid_fraction": py(float(plan.split.valid_fraction)),
        "split_seed": py(plan.split.seed),
        "join": join,
        "part_size": py(plan.output.part_size),
        "out_files": py(plan.output.out_files_per_proc),
        "shuffle": py(plan.output.shuffle),
        "shuffle_valid": py(plan.output.shuffle_valid),
        "shuffle_seed": py(plan.output.seed),
        "categorical": block(list(plan.categorical), 14),
        "continuous": block(list(plan.continuous), 13),
        "labels": block(list(plan.labels), 9),
        "output_dtypes": block(dict(plan.dtypes), 16),
        "crosses": bool(plan.crosses),
        "constant_index": plan.hashing,
        "list_inputs": bool(inputs.multi_hot),
        "chains": chains,
        "outputs": outputs,
        "out_dir": py(plan.output.dir),
        "cluster": block(_cluster(plan.cluster)),
    }


def _cluster(c: ClusterPlan) -> dict:
    """The cluster settings etl.py reads, by the names of LocalCUDACluster / LocalCluster where they have one."""
    return {"workers": c.workers, "protocol": c.protocol,
            "devices": None if c.devices is None else ",".join(str(d) for d in c.devices),
            "device_memory_limit": c.device_memory_limit, "rmm_pool": c.rmm_pool,
            "local_directory": c.local_directory, "threads_per_worker": c.threads_per_worker,
            "memory_limit": c.memory_limit, "memory_target_fraction": c.memory_target_fraction,
            "memory_spill_fraction": c.memory_spill_fraction}


def etl_digest(spec_text: str) -> str:
    """etl.py depends on the spec and the templates only (not on the features lock, which it produces)."""
    h = hashlib.sha256()
    for part in (spec_text, templates_digest()):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def render_etl_py(plan: EtlPlan, *, spec_display: str, spec_text: str, name: str) -> str:
    digest = etl_digest(spec_text)
    header = (f"# @generated by ctrgen from {spec_display} (inputs sha256:{digest[:16]}). DO NOT EDIT.\n"
              f"# NVTabular ETL for model {name!r}: raw files -> parquet + saved workflow.\n"
              f"# Regenerate with: ctrgen generate {spec_display}; run with: ctrgen etl {spec_display}")
    return render("etl/etl.py.j2", **etl_context(plan, header=header, name=name))
