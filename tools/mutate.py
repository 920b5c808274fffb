"""Mutation check of the facts the generator owns (issue 17 item 2): `make mutate`.

Each mutant below changes one fact in codegen/ or templates/ by a textual edit. For each, in a fresh temporary copy
of the checkout: apply the edit, regenerate generated/ with the changed generator (so that tests reading committed
files cannot notice it; a mutant that makes generation fail leaves generated/ as it was), then run the mutant's small
test subset. A mutant whose tests still pass is a survivor. The checkout itself is never touched.

    python tools/mutate.py                  # every mutant; exit 1 if any survives
    python tools/mutate.py --list
    python tools/mutate.py vocab-lazyglobal eval-mode
    python tools/mutate.py --jobs 2         # mutants in parallel (each runs its tests with -n0)

A mutant whose text is no longer found exactly once is reported as stale (exit 2): update its `old` text when the
code it targets moves. Results are printed as a table; docs/testing.md records the last run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPY = ("codegen", "templates", "tests", "tools", "specs", "generated", "pyproject.toml")
FACTS = "tests/test_facts.py"
ETL_VALUES = "tests/test_etl_values.py"
FAST_PATHS = "tests/test_torch_fast_paths.py"
CONTINUOUS_TORCH = "tests/test_torch_continuous.py"
NVT_ARRAYS = "tests/test_nvt_arrays.py"
IMPORT_EXACT = "tests/test_import_exact.py"
IMPORT_DIFF = "tests/test_import_differential.py"
SHARD = "tests/test_torch_shard.py"
PARITY = "tests/test_layer_parity.py"
PARITY_SEQ = "tests/test_layer_parity_seq.py"
ATTENTION = "codegen/runtime/attention.py"
WEIGHTS = "tests/test_weights.py"
WEIGHTS_CLI = "tests/test_weights_cli.py"
INIT = "codegen/runtime/initializers.py"
INIT_TESTS = "tests/test_torch_init.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    fact: str
    path: str          # file under the checkout
    old: str           # must occur exactly once
    new: str
    tests: str         # pytest -k expression over `files`
    issue: bool = False  # one of the seven facts issue 17 found unguarded
    files: tuple[str, ...] = (FACTS,)


MUTANTS = (
    # -- the seven of issue 17 --
    Mutant("vocab-lazyglobal", "Adam with LazyGlobal keeps a third state copy in the vocabulary formula",
           "codegen/hugectr/versions.py",
           '(1 if optimizer == "Adam" and update_type == "LazyGlobal" else 0)', "0", "vocabulary", issue=True),
    Mutant("cardinality-max-plus-one", "cardinality = int_domain.max + 1", "codegen/programs/cardinality.py",
           "card = int_or_none(domain_max) + 1", "card = int_or_none(domain_max)", "cardinality", issue=True),
    Mutant("drift-order", "a stale-lock check compares ordered column lists, not sets", "codegen/features.py",
           "if [c.name for c in getattr(locked, group)] != [c.name for c in getattr(fresh, group)]:",
           "if {c.name for c in getattr(locked, group)} != {c.name for c in getattr(fresh, group)}:", "lock_drift",
           issue=True),
    Mutant("drift-multi-hot", "a stale-lock check sees multi-hot changes", "codegen/features.py",
           "            if a[name] != b[name]:",
           '            if __import__("dataclasses").replace(a[name], multi_hot=False) != '
           '__import__("dataclasses").replace(b[name], multi_hot=False):', "lock_drift", issue=True),
    Mutant("drift-max-len", "a stale-lock check sees max_len changes", "codegen/features.py",
           "            if a[name] != b[name]:",
           '            if __import__("dataclasses").replace(a[name], max_len=None) != '
           '__import__("dataclasses").replace(b[name], max_len=None):', "lock_drift", issue=True),
    Mutant("eval-mode", "evaluate() runs the model in eval mode", "codegen/runtime/evaluation.py",
           'of the evaluation rows of every rank."""\n    model.eval()\n',
           'of the evaluation rows of every rank."""\n', "eval_mode", issue=True),
    Mutant("tensor-dims", "Triton tensors are declared [-1]", "codegen/triton/plan/repository.py",
           "dims: tuple[int, ...] = (-1,)", "dims: tuple[int, ...] = (1,)", "triton_tensor", issue=True),
    Mutant("ensemble-batch-rule", "validate: an ensemble's max_batch_size may equal its steps'",
           "codegen/triton/lint/rules_ensemble.py",
           "if member.config.max_batch_size < ens.config.max_batch_size:",
           "if member.config.max_batch_size <= ens.config.max_batch_size:", "ensemble_batch", issue=True),
    Mutant("keyset-signed", "32-bit keysets are unsigned", "codegen/keysets/write.py",
           '"int32": np.dtype("<u4")', '"int32": np.dtype("<i4")', "keyset", issue=True),
    # -- ten more (and a few beside them) --
    Mutant("vocab-adam-states", "Adam keeps two state copies", "codegen/hugectr/versions.py",
           '{"Adam": 2, "AdaGrad": 1,', '{"Adam": 1, "AdaGrad": 1,', "vocabulary"),
    Mutant("vocab-adagrad-states", "AdaGrad keeps one state copy", "codegen/hugectr/versions.py",
           '"AdaGrad": 1, "MomentumSGD"', '"AdaGrad": 0, "MomentumSGD"', "vocabulary"),
    Mutant("vocab-before-3.5", "before 3.5 the vocabulary ignores the optimizer", "codegen/hugectr/versions.py",
           'if not p.has("vocab_optimizer_states"):', "if False:", "vocabulary"),
    Mutant("vocab-gpu-count", "max_vocabulary_size_global = per GPU x GPU count", "codegen/graph/sparse.py",
           "optimizer.update_type) * gpu_count", "optimizer.update_type)", "vocabulary"),
    Mutant("cardinality-positive", "a cardinality below 1 is refused", "codegen/programs/cardinality.py",
           "if card is not None and card <= 0:", "if card is not None and card < 0:", "cardinality"),
    Mutant("slot-order", "slot_size_array keeps the lock's slot order", "codegen/features.py",
           "return [int(c.cardinality or 0) for c in self.categorical]",
           "return sorted(int(c.cardinality or 0) for c in self.categorical)", "slot"),
    Mutant("drift-inputs-order", "a stale-lock check compares the request columns in order", "codegen/features.py",
           "and locked.inputs != fresh.inputs:", "and set(locked.inputs) != set(fresh.inputs):", "lock_drift"),
    Mutant("eval-restores-train", "evaluate() puts the model back in training mode",
           "codegen/runtime/evaluation.py",
           "        labels.append(label)\n    model.train()\n", "        labels.append(label)\n",
           "eval_mode"),
    Mutant("dtype-int64", "an int64 column is TYPE_INT64 in Triton", "codegen/triton/plan/repository.py",
           '"int32": "TYPE_INT32", "int64": "TYPE_INT64",', '"int32": "TYPE_INT32", "int64": "TYPE_INT32",',
           "triton_tensor or request_dtypes"),
    Mutant("dtype-request-fp64", "a float64 request column is TYPE_FP64", "codegen/triton/plan/repository.py",
           '"float64": "TYPE_FP64"', '"float64": "TYPE_FP32"', "request_dtypes"),
    Mutant("model-key-dtype", "the HugeCTR model's CATCOLUMN is UINT32 for 32-bit keys",
           "codegen/hugectr/backend.py",
           'KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_UINT32"}',
           'KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_INT32"}', "i64_input_key"),
    Mutant("nvt-key-dtype", "the preprocessing model's CATCOLUMN follows the key width",
           "codegen/triton/plan/repository.py",
           'backend.input_types(pre.key_dtype == "int64")', 'backend.input_types(True)',
           "i64_input_key"),
    Mutant("ensemble-max-batch", "the ensemble's max_batch_size is its steps'", "codegen/triton/plan/repository.py",
           "max_batch_size=nvt.max_batch_size,", "max_batch_size=nvt.max_batch_size + 1,", "max_batch_size"),
    Mutant("ps-max-batch", "ps.json max_batch_size equals config.pbtxt's", "codegen/triton/plan/repository.py",
           '"max_batch_size": model.max_batch_size,', '"max_batch_size": model.max_batch_size - 1,',
           "max_batch_size"),
    Mutant("keyset-range", "32-bit keys reach 2**32 - 1", "codegen/keysets/write.py",
           '"int32": (0, UINT32_MAX)', '"int32": (0, UINT32_MAX >> 1)', "keyset"),
    Mutant("batch-divisible", "batchsize must divide by the GPU count", "codegen/graph/build.py",
           "elif s.solver.batchsize % gpu_count:", "elif s.solver.batchsize % gpu_count > 1:", "batchsize"),
    Mutant("i64-unsigned", "uint64 ids make i64_input_key", "codegen/graph/build.py",
           'i64 = bool(dtypes & {"int64", "uint64"})', 'i64 = bool(dtypes & {"int64"})', "i64_input_key"),
    Mutant("nnz-max-len", "nnz_per_slot must hold the longest list the schema records", "codegen/graph/sparse.py",
           "if c.multi_hot and c.max_len is not None and v < c.max_len:",
           "if c.multi_hot and c.max_len is not None and v < c.max_len - 1:", "nnz"),
    Mutant("nnz-default", "a multi-hot slot's default nnz is its max_len", "codegen/graph/sparse.py",
           "values.append(c.max_len or 1 if c.multi_hot else 1)", "values.append(1)", "nnz"),
    Mutant("workspace-zero", "workspace 0 needs slot_size_array", "codegen/graph/sparse.py",
           "if (ws is None or ws == 0) and not e.slot_size_array:", "if ws is None and not e.slot_size_array:",
           "workspace"),
    Mutant("interaction-width", "DLRM's Interaction output: vec + n(n-1)/2 + 1 for n = slots + 1",
           "codegen/graph/shapes.py", "mlp.width + s * (s + 1) // 2 + 1", "mlp.width + s * (s - 1) // 2 + 1",
           "dimensions", files=("tests/test_criteo_specs.py",)),
    Mutant("reshape-leading-dim", "Reshape leading_dim = slots x vec (presets)", "codegen/graph/presets.py",
           "leading_dim=e.slot_num * e.vec_size)", "leading_dim=e.vec_size)", "dimensions",
           files=("tests/test_criteo_specs.py",)),
    Mutant("spec-positive", "counts and sizes are at least 1", "codegen/specfile/fields.py",
           "PosInt = Annotated[int, Field(gt=0,", "PosInt = Annotated[int, Field(ge=0,", "spec_bounds"),
    Mutant("spec-non-negative", "seeds and workspaces are at least 0", "codegen/specfile/fields.py",
           "NonNegInt = Annotated[int, Field(ge=0,", "NonNegInt = Annotated[int, Field(ge=-1,", "spec_bounds"),
    Mutant("spec-probability", "a dropout rate is below 1", "codegen/specfile/fields.py",
           "Prob = Annotated[float, Field(ge=0.0, lt=1.0,", "Prob = Annotated[float, Field(ge=0.0, le=1.0,",
           "spec_bounds"),
    Mutant("spec-vec-max", "embedding_vec_size is at most 1024", "codegen/specfile/model.py",
           "embedding_vec_size: Annotated[int, Field(ge=1, le=1024,",
           "embedding_vec_size: Annotated[int, Field(ge=1, le=1025,", "spec_bounds"),
    Mutant("metrics-rank-zero", "only rank 0 records the run's metrics (metrics.jsonl, TensorBoard)",
           "codegen/runtime/trainer.py", "    if rank == 0:\n        recorder = Recorder(",
           "    if True:\n        recorder = Recorder(", "two_ranks_on_the_cpu", files=("tests/test_train_command.py",)),
    Mutant("torch-seed", "train_torch.py's default seed is the spec's", "codegen/render/torch_model.py",
           '"seed": solver.seed,', '"seed": 0,', "seed"),
    Mutant("torch-schedule-defaults", "train_torch.py's schedule takes HugeCTR's defaults from the API table",
           "codegen/graph/build.py", 's = call_values("CreateSolver", solver, release)',
           's = {k: v if k in dict(solver) else 0 for k, v in call_values("CreateSolver", solver, release).items()}',
           "hugectrs_default", files=("tests/test_lr_schedule_rules.py",)),
    Mutant("dense-defaults-from-the-table", "a layer's arguments in effect take HugeCTR's defaults from the API table "
           "(one default read otherwise: eps 0)", "codegen/graph/ir.py",
           'A.defaults(func, release).items()', '{**A.defaults(func, release), "eps": 0.0}.items()',
           "default", files=("tests/test_defaults_once.py",)),
    Mutant("workspace-default-from-the-table", "an embedding's workspace left out is the API table's default in the "
           "graph JSON and task.py (resolved once by the builder)", "codegen/graph/sparse.py",
           'int(A.default("SparseEmbedding", "workspace_size_per_gpu_in_mb", p.name))',
           '1 + int(A.default("SparseEmbedding", "workspace_size_per_gpu_in_mb", p.name))', "workspace_left_out",
           files=("tests/test_defaults_once.py",)),
    Mutant("task-lr-default", "task.py's lr default is HugeCTR's, from the API table", "codegen/render/task.py",
           'lr=solver.schedule.lr,', 'lr=float(dict(job.solver).get("lr", 0.01)),', "hugectrs_default",
           files=("tests/test_lr_schedule_rules.py",)),
    # -- the ETL (tests/test_etl_values.py: etl.py's own functions and constants, rendered from a spec) --
    Mutant("etl-split-seed", "the validation split uses the spec's split.seed", "codegen/etl/render.py",
           '"split_seed": py(plan.split.seed),', '"split_seed": py(0),', "split", files=(ETL_VALUES,)),
    Mutant("etl-split-fraction", "the split holds out valid_fraction of the rows, not the rest",
           "templates/etl/etl.py.j2", "(uniform(rows, SPLIT_SEED) < VALID_FRACTION) == keep_valid",
           "(uniform(rows, SPLIT_SEED) >= VALID_FRACTION) == keep_valid", "split", files=(ETL_VALUES,)),
    Mutant("etl-split-offsets", "a partition's rows are numbered from its offset", "templates/etl/etl.py.j2",
           'first = offsets[partition_info["number"]]', "first = 0", "split", files=(ETL_VALUES,)),
    Mutant("etl-split-uniform", "a row's number is the top 53 bits of splitmix64 over 2**53",
           "codegen/programs/etl.py", "astype(np.float64) / float(1 << 53)", "astype(np.float64) / float(1 << 52)",
           "split", files=(ETL_VALUES,)),
    # -- ctrgen report (tests/test_report.py: synthetic run folders drawn in-process) --
    Mutant("report-auc-axis", "an AUC chart is drawn on 0.5-1 while every value is in it", "codegen/train/report.py",
           "unit_range=unit,", "unit_range=False,", "overlaid", files=("tests/test_report.py",)),
    Mutant("report-epochs", "an epoch starts every steps_per_epoch iterations", "codegen/train/report.py",
           'steps += [(k * per, f"epoch {k + 1}")', 'steps += [((k + 1) * per, f"epoch {k + 1}")', "overlaid",
           files=("tests/test_report.py",)),
    Mutant("onnx-step-range", "a key outside its slot's range makes that sample's ONNX score NaN",
           "codegen/export/vcsr.py", "bad = bad | wrong.any(dim=1) | (n[:, 0] > nnz)", "bad = bad | (n[:, 0] > nnz)",
           "vcsr_request", files=("tests/test_onnx_step.py",)),
    Mutant("etl-list-index", "a held-out split's rows keep their own lists (a fresh index before Categorify)",
           "codegen/etl/render.py", '"list_inputs": bool(inputs.multi_hot),', '"list_inputs": False,',
           "held_out_split_keeps", files=("tests/test_etl.py",)),
    Mutant("etl-shuffle-seed", "the training shuffle uses the spec's output.seed", "codegen/etl/render.py",
           '"shuffle_seed": py(plan.output.seed),', '"shuffle_seed": py(0),', "shuffle", files=(ETL_VALUES,)),
    Mutant("etl-shuffle-per-partition", "each partition is shuffled with a seed of its own",
           "codegen/programs/etl.py", 'key = [SHUFFLE_SEED, partition_info["number"]] + ',
           "key = [SHUFFLE_SEED] + ", "shuffle", files=(ETL_VALUES,)),
    Mutant("etl-shuffle-valid-stream", "the validation rows' shuffle is a seed stream of its own",
           "codegen/programs/etl.py", "+ ([split] if split else [])", "+ []", "shuffle", files=(ETL_VALUES,)),
    Mutant("etl-shuffle-valid-switch", "output.shuffle_valid reaches etl.py", "codegen/etl/render.py",
           '"shuffle_valid": py(plan.output.shuffle_valid),', '"shuffle_valid": py(False),', "shuffle",
           files=(ETL_VALUES,)),
    Mutant("etl-shuffle-switch", "output.shuffle reaches etl.py", "codegen/etl/render.py",
           '"shuffle": py(plan.output.shuffle),', '"shuffle": py(True),', "shuffle", files=(ETL_VALUES,)),
    Mutant("etl-dtype-ids", "categorical ids are written as int64", "codegen/etl/plan.py",
           'dtypes.update({c: "int64" for c in cats if c not in multi_out})',
           'dtypes.update({c: "int32" for c in cats if c not in multi_out})', "dtypes", files=(ETL_VALUES,)),
    Mutant("etl-dtype-labels", "labels are written as float32, as continuous columns", "codegen/etl/plan.py",
           'dtypes.update({c: "float32" for c in conts + labels})', 'dtypes.update({c: "float32" for c in conts})',
           "dtypes", files=(ETL_VALUES,)),
    Mutant("etl-dtype-lists", "list columns stay out of to_parquet's dtypes", "codegen/etl/plan.py",
           'dtypes.update({c: "int64" for c in cats if c not in multi_out})',
           'dtypes.update({c: "int64" for c in cats})', "dtypes", files=(ETL_VALUES,)),
    Mutant("etl-slot-order", "crossed columns come first in the slot order", "codegen/etl/plan.py",
           "cats = tuple(x.output for x in crosses) + tuple(c for g in groups if g.role == \"categorical\" "
           "for c in g.columns)",
           "cats = tuple(c for g in groups if g.role == \"categorical\" for c in g.columns) + "
           "tuple(x.output for x in crosses)", "dtypes", files=(ETL_VALUES,)),
    Mutant("etl-categorify-options", "Categorify gets the spec's freq_threshold, max_size, num_buckets",
           "codegen/etl/render.py", 'return _call("Categorify", op.args, "out_path=cat_dir")',
           'return _call("Categorify", (), "out_path=cat_dir")', "categorify", files=(ETL_VALUES,)),
    Mutant("etl-cross-combo", "a combo cross is Categorify(encode_type=\"combo\")", "codegen/etl/render.py",
           "'encode_type=\"combo\"'", "'encode_type=\"joint\"'", "categorify", files=(ETL_VALUES,)),
    Mutant("etl-cross-freq", "a combo cross gets its freq_threshold", "codegen/etl/render.py",
           'f"freq_threshold={py(x.freq_threshold)}" if x.freq_threshold else ""', '""', "categorify",
           files=(ETL_VALUES,)),
    Mutant("etl-hashed-buckets", "a hashed cross has the spec's bucket count", "codegen/etl/render.py",
           'op = (f"ops.HashedCross({py(x.num_buckets)})",', 'op = (f"ops.HashedCross({py(x.num_buckets + 1)})",',
           "categorify", files=(ETL_VALUES,)),
    # -- boundaries (tests/test_boundaries.py) --
    Mutant("key-offsets", "the largest key is the cardinality sum - 1 (a sum of 2**32 fits unsigned int)",
           "codegen/graph/build.py", "if total - 1 > key_max:", "if total > key_max:", "slot_offsets",
           files=("tests/test_boundaries.py",)),
    Mutant("args-long-long", "an args value for a long long parameter fits 64 bits signed",
           "codegen/hugectr/arg_types.py", '"int64": (INT64_MIN, INT64_MAX, "long long")',
           '"int64": (INT64_MIN, UINT64_MAX, "long long")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-size-t", "an args value for a size_t parameter is not negative",
           "codegen/hugectr/arg_types.py", '"uint64": (0, UINT64_MAX, "size_t / uint64")',
           '"uint64": (INT64_MIN, UINT64_MAX, "size_t / uint64")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-float", "an args value for a float parameter fits a C++ float",
           "codegen/hugectr/arg_types.py", '"float32": (FLT_MAX, "float")',
           '"float32": (DBL_MAX, "float")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-int-strict", "an args value for an int parameter is an integer, not a float",
           "codegen/hugectr/arg_types.py", "if not isinstance(value, int) or isinstance(value, bool):",
           "if not isinstance(value, (int, float)) or isinstance(value, bool):", "args",
           files=("tests/test_boundaries.py",)),
    # -- the runtime's optimizers and checkpoints, the served numpy preprocessing (issue 25) --
    Mutant("dense-nesterov", "Nesterov momentum reaches the fused SGD step", "codegen/runtime/dense_optim.py",
           'nesterov=h.get("nesterov", False)', "nesterov=False", "dense_optimizer", files=(FAST_PATHS,)),
    Mutant("dense-adagrad-eps", "AdaGrad divides by sqrt(sum) + eps", "codegen/runtime/dense_optim.py",
           'torch._foreach_add_(std, h["eps"])', 'torch._foreach_add_(std, 1e-3)', "dense_optimizer",
           files=(FAST_PATHS,)),
    Mutant("dense-rmsprop-alpha", "RMSProp decays its squares by alpha", "codegen/runtime/dense_optim.py",
           'torch._foreach_mul_(squares, h["alpha"])', "torch._foreach_mul_(squares, 0.5)", "dense_optimizer",
           files=(FAST_PATHS,)),
    Mutant("row-adam-bias", "row-wise Adam corrects the first moment's bias", "codegen/runtime/row_optim.py",
           "bias1 = 1 - torch.pow(beta1, self.steps)", "bias1 = torch.ones_like(self.steps)", "row_update",
           files=(FAST_PATHS,)),
    Mutant("row-adagrad-eps", "row-wise AdaGrad adds eps to the root of the sum", "codegen/runtime/row_optim.py",
           'w.addcdiv_(g * -lr, s.sqrt().add_(self.hyper["eps"]))', "w.addcdiv_(g * -lr, s.sqrt().add_(1e-3))",
           "row_update", files=(FAST_PATHS,)),
    Mutant("resume-optimizer", "a resumed run restores the optimizer's state", "codegen/runtime/checkpoint.py",
           '_load_optimizer(path, optimizer, state["optimizer"])', "None", "resumes", files=(CONTINUOUS_TORCH,)),
    Mutant("resume-imported-fresh", "a checkpoint imported from HugeCTR's files ({} optimizer) resumes with a fresh "
           "optimizer", "codegen/runtime/checkpoint.py", 'if state["optimizer"] != {}:', "if True:", "resumes",
           files=(WEIGHTS_CLI,)),
    Mutant("served-model-frozen", "a served PyTorch model's initialize leaves what it built out of the collector's "
           "full passes (its stub's exit scans none of torch)", "codegen/runtime/torch_model.py",
           "        gc.freeze()\n", "", "execute", files=("tests/test_triton_outputs.py",)),
    # -- several ranks (issue 27) --
    Mutant("shard-grad-average", "a split table's row gradients are averaged over the ranks",
           "codegen/runtime/shards.py", "split = ScaledGradient.apply(split, 1.0 / self.placement.size)",
           "split = ScaledGradient.apply(split, 1.0)", "equal_one_whole", files=(SHARD,)),
    Mutant("table-grad-average", "a table's exchanged row gradients are averaged over the ranks",
           "codegen/runtime/shards.py", "exchanged = ScaledGradient.apply(exchanged, 1.0 / self.placement.size)",
           "exchanged = ScaledGradient.apply(exchanged, 1.0)", "equal_one_whole", files=(SHARD,)),
    Mutant("shared-grad-average", "a shared table's gathered gradient is divided by the ranks",
           "codegen/runtime/layers.py", "return table.div_(torch.distributed.get_world_size()), None, None",
           "return table, None, None", "equal_one_whole", files=(SHARD,)),
    Mutant("rows-settle", "the row update waits for the exchanged rows' gradients", "codegen/runtime/row_optim.py",
           '        settle("rows")      # the exchanged rows\' gradients (launched in backward)\n', "",
           "equal_one_whole", files=(SHARD,)),
    Mutant("dense-settle", "the dense step waits for the dense gradients' average", "codegen/runtime/dense_optim.py",
           '        settle("dense")     # the gradients\' average over the ranks (GradientSync, launched with later=True)\n',
           "", "equal_one_whole", files=(SHARD,)),
    Mutant("slot-order-backward", "the slots' gradients go back to the order the lookup yielded them",
           "codegen/runtime/shards.py", "return grad.index_select(ctx.dim, inverse), None, None, None",
           "return grad.index_select(ctx.dim, inverse.flip(0)), None, None, None", "assembled", files=(SHARD,)),
    Mutant("nested-graph-breaks", "a sharded table's assembly is compiled with the layers that read its vectors",
           "codegen/runtime/compiled.py", "        torch._dynamo.config.nested_graph_breaks = True\n",
           "        pass\n", "compiled_with_the_layers", files=(SHARD,)),
    Mutant("dense-grad-average", "the dense gradients are averaged over the ranks, not summed",
           "codegen/runtime/distributed.py", "                flat.div_(self.size)\n", "", "equal_one_whole",
           files=(SHARD,)),
    Mutant("dense-grad-average-large", "a large dense gradient is averaged over the ranks too",
           "codegen/runtime/distributed.py", "lambda g=g: g.div_(self.size)", "lambda g=g: g", "equal_one_whole",
           files=(SHARD,)),
    Mutant("column-order", "rank r holds columns r*width to (r+1)*width", "codegen/runtime/shards.py",
           ".permute(1, 2, 0, 3)", ".permute(1, 2, 3, 0)", "equal_one_whole", files=(SHARD,)),
    Mutant("pair-select-backward", "the Interaction's backward gathers each pair's gradient in place",
           "codegen/runtime/layers.py", "F.pad(grad, (0, 1)).index_select(1, inverse)",
           "F.pad(grad, (1, 0)).index_select(1, inverse)", "interaction_backward", files=(FAST_PATHS,)),
    Mutant("self-dots-backward", "the Interaction's dot products send their gradient to both features of a pair",
           "codegen/runtime/layers.py", "torch.bmm((grad + grad.transpose(1, 2)).to(x.dtype), x)",
           "torch.bmm(grad.to(x.dtype), x)", "interaction_backward", files=(FAST_PATHS,)),
    Mutant("interaction-padding", "the Interaction's pairs are positions in the padded dot matrix",
           "codegen/runtime/layers.py", "pairs = where[rows] * self.padded + where[cols]",
           "pairs = where[rows] * self.num_features + where[cols]",
           "interaction_backward", files=(FAST_PATHS,)),
    Mutant("linear-padding", "a linear layer's input is padded with zero columns after its own",
           "codegen/runtime/layers.py", "F.linear(F.pad(x, (0, pad)), F.pad(layer.weight, (0, pad)), layer.bias)",
           "F.linear(F.pad(x, (pad, 0)), F.pad(layer.weight, (0, pad)), layer.bias)",
           "unaligned_width", files=(FAST_PATHS,)),
    Mutant("reduce-group", "the step's gradient all_reduces travel on their own communicator",
           "codegen/runtime/distributed.py",
           "collective_later(later, dist.all_reduce, value, op=op, group=reduce_group(), then=then)",
           "collective_later(later, dist.all_reduce, value, op=op, then=then)", "equal_one_whole", files=(SHARD,)),
    Mutant("interaction-order", "an Interaction told its slots' order multiplies the same pairs as in slot order",
           "codegen/runtime/layers.py", "        self._place_pairs(self.order)\n",
           "        self._place_pairs(list(range(self.num_features - 1)))\n", "any_order", files=(FAST_PATHS,)),
    Mutant("shard-order-readers", "only a table that Interactions alone read yields its shard's order",
           "codegen/runtime/feature_order.py", "if not readers or len(takers) != len(readers) or not all(",
           "if not readers or not all(", "interactions_alone", files=(SHARD,)),
    Mutant("replica-grad-sum", "a replicated slot's gradient is summed over the ranks", "codegen/runtime/shards.py",
           '        all_reduce(flat, later="replicas")\n', "", "equal_one_whole", files=(SHARD,)),
    Mutant("replica-grad-average", "a replicated slot's summed gradient is divided by the ranks",
           "codegen/runtime/shards.py", "share = 1.0 / self.placement.size", "share = 1.0",
           "equal_one_whole", files=(SHARD,)),
    Mutant("replica-lazy-adam", "lazy Adam leaves rows no rank looked up", "codegen/runtime/row_optim.py",
           "            keep = looked_up[:, None]\n", "            keep = torch.ones_like(looked_up)[:, None]\n",
           "equal_one_whole", files=(SHARD,)),
    # -- the attention models' layers (runtime/attention.py) against HugeCTR's arithmetic --
    Mutant("dice-epsilon", "PReLU_Dice adds eps to the variance under the square root", ATTENTION,
           "p = torch.sigmoid((s - mean) / torch.sqrt(var + eps))",
           "p = torch.sigmoid((s - mean) / (torch.sqrt(var) + eps))", "prelu_dice", files=(PARITY_SEQ,)),
    Mutant("dice-alpha-backward", "PReLU_Dice's backward mixes alpha in as HugeCTR's does", ATTENTION,
           "local = (p_s * s + p) * (1 - alpha) + alpha", "local = (p_s * s + p) * (1 - alpha)", "prelu_dice",
           files=(PARITY_SEQ,)),
    Mutant("scale-axis", "Scale axis 0 repeats along the width, axis 1 along the rows", ATTENTION,
           "x.repeat_interleave(factor, dim=1 if axis == 0 else 0)",
           "x.repeat_interleave(factor, dim=0 if axis == 0 else 1)", "scale", files=(PARITY_SEQ,)),
    Mutant("scale-first-copy", "Scale's backward takes the first copy's gradient", ATTENTION,
           "first = grad[:, ::ctx.factor] if ctx.axis == 0 else grad[::ctx.factor]",
           "first = grad[:, ctx.factor - 1::ctx.factor] if ctx.axis == 0 else grad[ctx.factor - 1::ctx.factor]",
           "scale", files=(PARITY_SEQ,)),
    Mutant("dot-product-zero", "DotProduct's gradient is 0 where its output is 0", ATTENTION,
           "        zero = y == 0\n", "        zero = torch.zeros_like(y, dtype=torch.bool)\n", "dot_product",
           files=(PARITY_SEQ,)),
    Mutant("fused-reshape-concat-target", "FusedReshapeConcat's second output is the last slot", ATTENTION,
           "return x[:, :-1].reshape(-1, x.shape[-1]), x[:, -1]", "return x[:, 1:].reshape(-1, x.shape[-1]), x[:, 0]",
           "fused_reshape_concat", files=(PARITY_SEQ,)),
    Mutant("fused-reshape-concat-general-rows", "FusedReshapeConcatGeneral's rows are sample-major", ATTENTION,
           "    x = torch.cat(xs, dim=-1)\n    return x.reshape(-1, x.shape[-1])\n",
           "    x = torch.cat(xs, dim=-1)\n    return x.transpose(0, 1).reshape(-1, x.shape[-1])\n",
           "fused_reshape_concat_general", files=(PARITY_SEQ,)),
    Mutant("matrix-multiply-order", "MatrixMultiply multiplies its first input by its second",
           "codegen/render/torch_model.py", "torch.matmul({ins[0]}, {ins[1]})", "torch.matmul({ins[1]}, {ins[0]})",
           "matrix_multiply", files=(PARITY_SEQ,)),
    Mutant("sequence-mask-int-length", "SequenceMask truncates a length to an int as the kernel reads it", ATTENTION,
           "x.reshape(-1)[:x.shape[0]].to(torch.int64)", "x.reshape(-1)[:x.shape[0]].ceil().to(torch.int64)",
           "sequence_mask", files=(PARITY_SEQ,)),
    Mutant("sequence-mask-from-rows", "SequenceMask's `from` lengths mask rows, `to` lengths columns", ATTENTION,
           "(rows[:, :, None] & cols[:, None, :])", "(rows[:, None, :] & cols[:, :, None])", "sequence_mask",
           files=(PARITY_SEQ,)),
    Mutant("mha-scale", "MultiHeadAttention scales the scores by 1/sqrt(size per head)", ATTENTION,
           "return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), _heads(value, heads)",
           "return q @ k.transpose(-1, -2) / math.sqrt(query.shape[-1]), _heads(value, heads)",
           "multi_head_attention", files=(PARITY_SEQ,)),
    Mutant("mha-head-split", "MultiHeadAttention's head h holds hidden units h*d to (h+1)*d", ATTENTION,
           "return x.reshape(n, seq, heads, hidden // heads).transpose(1, 2)",
           "return x.reshape(n, heads, seq, hidden // heads)", "multi_head_attention", files=(PARITY_SEQ,)),
    Mutant("mha-mask", "MultiHeadAttention's mask subtracts 10000 from a masked score", ATTENTION,
           "scores = scores - (1.0 - mask) * MASKED_SCORE", "scores = scores - mask * MASKED_SCORE",
           "multi_head_attention", files=(PARITY_SEQ,)),
    Mutant("masked-softmax-mask", "A two-input Softmax subtracts 10000 from the scores its mask masks out", ATTENTION,
           "z = x.float() * factor - (1.0 - m) * MASKED_SCORE", "z = x.float() * factor", "masked_softmax",
           files=(PARITY_SEQ,)),
    Mutant("masked-softmax-rows", "MaskedSoftmaxLayer reads a mask block per sample from 23.08, one row before",
           ATTENTION, "n, rows, width = x.shape[0], x.shape[-2] if per_row else 1, x.shape[-1]",
           "n, rows, width = x.shape[0], 1, x.shape[-1]", "masked_softmax", files=(PARITY_SEQ,)),
    Mutant("nvt-logop", "LogOp is log(x + 1)", "codegen/runtime/nvt_arrays.py",
           "return np.log(x.astype(op.output_dtype) + 1)", "return np.log(x.astype(op.output_dtype) + 2)",
           "demo_workflows or stacked", files=(NVT_ARRAYS,)),
    Mutant("nvt-normalize", "Normalize divides by the fitted std", "codegen/runtime/nvt_arrays.py",
           "return ((x - mean) / std if std > 0 else x - mean).astype(op.output_dtype)",
           "return ((x - mean) * std if std > 0 else x - mean).astype(op.output_dtype)",
           "demo_workflows or stacked", files=(NVT_ARRAYS,)),
    Mutant("nvt-clip-high", "Clip caps at max_value", "codegen/runtime/nvt_arrays.py",
           "        x[x > high] = high\n", "        pass\n", "demo_workflows or stacked", files=(NVT_ARRAYS,)),
    Mutant("nvt-oov", "an unseen category maps to NVTabular's out-of-vocabulary id 2", "codegen/runtime/nvt_values.py",
           "PAD, NULL, OOV = 0, 1, 2", "PAD, NULL, OOV = 0, 1, 3", "categorify or demo_workflows",
           files=(NVT_ARRAYS,)),
    # -- the importer's mapping: a call its handler declines goes on to the pattern handlers (issue 42) --
    Mutant("import-handler-declines", "a Model method its name's handler declines (no embedding cache) is a further "
           "Model method", "codegen/importer/handlers.py",
           "    if handler is not None and handler(st, call):\n        return\n",
           "    if handler is not None:\n        handler(st, call)\n        return\n",
           "calls_after_fit or loading_before_fit", files=("tests/test_import.py",)),
    # -- the importer's evaluator asks its world (the Reader) about what it is not: a file passed to a call (issue 42) --
    Mutant("import-file-passed", "a file the script writes, passed to a call (print(..., file=f)), has unknown text",
           "codegen/importer/calls.py", "                files.passed(self.script, v, node, self.ev.text(node.func))\n",
           "                pass\n", "passes_the_file", files=("tests/test_import_round4.py",)),
    # -- the importer's evaluator: Python's value or a refusal (issue 24) --
    Mutant("eval-floordiv", "// is floor division", "codegen/importer/builtins.py",
           "ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,", "ast.FloorDiv: operator.truediv, ast.Mod: operator.mod,",
           "values or argparse or differential or corpus", files=(IMPORT_EXACT, IMPORT_DIFF)),
    Mutant("eval-math-ceil", "math.ceil rounds up", "codegen/importer/stdlib.py",
           '"math.ceil": math.ceil,', '"math.ceil": math.floor,', "values or argparse or differential or corpus",
           files=(IMPORT_EXACT, IMPORT_DIFF)),
    Mutant("eval-argparse-type", "argparse applies type=str.upper to a string default", "codegen/importer/argv.py",
           "_TYPES = (int, float, str, bool, str.upper, str.lower, str.strip)",
           "_TYPES = (int, float, str, bool, str.lower, str.strip)", "values or argparse or differential or corpus",
           files=(IMPORT_EXACT, IMPORT_DIFF)),
    # -- the layer translations tests/test_layer_parity.py holds against HugeCTR's arithmetic --
    Mutant("torch-mlp-biases", "an MLP layer has a bias only where biases (or use_bias) give one",
           "codegen/render/torch_model.py", '("" if m[2] else ", bias=False")', '""', "mlp", files=(PARITY,)),
    Mutant("torch-select-dim", "Select takes dimension dim of the tensor, the batch being 0",
           "codegen/render/torch_model.py", "[':'] * dim + ", "[':'] * (dim - 1) + ", "select", files=(PARITY,)),
    Mutant("torch-group-fused-once", "a FusedInnerProduct of a group computes its output once (its other tops are "
           "HugeCTR's backward buffers)", "codegen/render/torch_model.py",
           'for out in outs if t == "InnerProduct" else outs[:1]:', "for out in outs:", "group_fused",
           files=(PARITY,)),
    Mutant("graph-unrunnable-gru", "GRU is refused for every target saying why HugeCTR cannot train it",
           "codegen/graph/unrunnable.py", 'if layer in UNRUNNABLE:', 'if layer == "Gather":',
           "refused_with", files=(PARITY,)),
    Mutant("graph-gather-select-from-23-08", "from 23.08 Gather is refused with the text of HugeCTR's SelectLayer",
           "codegen/hugectr/versions.py", '"gather_is_select": _s((23, 8)),', '"gather_is_select": _s((3, 2)),',
           "refused_with", files=(PARITY,)),
    Mutant("torch-interaction-padding", "the Interaction's last column is a zero of padding",
           "codegen/runtime/layers.py", "pad = bottom_mlp.new_zeros(batch, 1)", "pad = bottom_mlp.new_ones(batch, 1)",
           "interaction", files=(PARITY,)),
    Mutant("torch-multicross-bias", "each MultiCross layer adds its bias vector (DCN)", "codegen/runtime/layers.py",
           "(x @ self.weight[layer]).unsqueeze(-1) + self.bias[layer] + x",
           "(x @ self.weight[layer]).unsqueeze(-1) + x", "multi_cross", files=(PARITY,)),
    Mutant("torch-batchnorm-factor", "BatchNorm's factor is torch's momentum (cuDNN's exponentialAverageFactor)",
           "codegen/render/torch_model.py", "momentum={py(float(p['factor']))}",
           "momentum={py(1.0 - float(p['factor']))}", "batch_norm", files=(PARITY,)),
    # -- issue 46: an environment variable's path, the ETL cluster's host memory --
    Mutant("env-path-join", "${NAME-DEFAULT}/rest is os.path.join of the value and rest, not the value + rest",
           "codegen/runtime/contract.py", "return posixpath.join(value, env.rest) if env.joined else value + env.rest",
           "return value + env.rest", "environment", files=(IMPORT_EXACT, "tests/test_home_paths.py")),
    Mutant("env-path-default", "an environment variable's path reads the variable, its default only where unset",
           "codegen/runtime/contract.py", "value = os.environ.get(env.name, local_path(env.default))",
           "value = local_path(env.default)", "environment", files=(IMPORT_EXACT, "tests/test_home_paths.py")),
    Mutant("env-import-slash", "a '/' appended right after an environment variable's bare value is refused",
           "codegen/importer/values.py", "(not self.rest and not self.joined_ and text.startswith(\"/\"))",
           "(False)", "environment", files=(IMPORT_EXACT,)),
    Mutant("etl-memory-limit", "etl.cluster.memory_limit reaches the local cluster's workers",
           "codegen/programs/etl.py", '"dashboard_address": None, "memory_limit": c["memory_limit"]}',
           '"dashboard_address": None}', "memory or gpu_cluster", files=("tests/test_etl_cluster.py",)),
    # -- HugeCTR's weight files (issue 47) --
    Mutant("weights-kernel-in-out", "HugeCTR keeps an InnerProduct's kernel as (in, out), nn.Linear as (out, in)",
           "codegen/weights/convert.py", "    if piece.transpose:\n        value = value.T\n", "", "bit_identical or reader",
           files=(WEIGHTS,)),
    Mutant("weights-key-offset", "a key is the id plus its slot's offset over every slot of the model",
           "codegen/weights/convert.py", "np.arange(s.rows, dtype=np.int64) + s.key_offset",
           "np.arange(s.rows, dtype=np.int64) + s.row_offset", "offset", files=(WEIGHTS,)),
    Mutant("weights-multicross-order", "a MultiCross layer's weight comes before its bias, layer by layer",
           "codegen/weights/layout.py", 'pieces += [Piece(top, f"{attr}.weight", (width,), row=i), '
           'Piece(top, f"{attr}.bias", (width,), row=i)]', 'pieces += [Piece(top, f"{attr}.bias", (width,), row=i), '
           'Piece(top, f"{attr}.weight", (width,), row=i)]', "reader", files=(WEIGHTS,)),
    Mutant("weights-absent-rows-zero", "rows no key of the file sets import as zeros (HPS's default value)",
           "codegen/weights/convert.py", "table = np.zeros((t.rows + 1, t.vec_size), dtype=np.float32)",
           "table = np.ones((t.rows + 1, t.vec_size), dtype=np.float32)", "standin", files=(WEIGHTS_CLI,)),
    Mutant("planted-history-term", "the behaviour log's label depends on the history's share of the target category",
           "codegen/demo/families.py", "logit = item_bias[mids[:, HISTORY] - 1] + GAMMA * share",
           "logit = item_bias[mids[:, HISTORY] - 1] + 0.0 * share", "behaviour_log",
           files=("tests/test_families_learn.py",)),
    Mutant("planted-shared-part", "the two labels share part of their planted logit", "codegen/demo/families.py",
           "        z = shared + own\n", "        z = own\n", "two_label_set", files=("tests/test_families_learn.py",)),
    Mutant("init-truncated-stddev", "HugeCTR's \"truncated\" normal draws a plain normal of sqrt(scale/fan)/0.8796",
           INIT, 'return "normal", math.sqrt(scale) / TRUNCATED if truncated else math.sqrt(scale)',
           'return "normal", math.sqrt(scale)', "inner_product_default", files=(INIT_TESTS,)),
    Mutant("init-bias-fan", "an InnerProduct's bias rules read fan_in as 0", INIT,
           "bottom = fan_in if index == 0 else 0\n        if init == \"Uniform\":\n            return \"uniform\", "
           "1.0 / (bottom + fan_out)", "bottom = fan_in\n        if init == \"Uniform\":\n            return "
           "\"uniform\", 1.0 / (bottom + fan_out)", "inner_product_uniform", files=(INIT_TESTS,)),
    Mutant("init-mlp-uniform", "an MLP's Default is U(-sqrt(1/in), sqrt(1/in))", INIT,
           'return "uniform", math.sqrt(1.0 / fan_in)', 'return "uniform", math.sqrt(1.0 / fan_out)', "mlp",
           files=(INIT_TESTS,)),
    Mutant("shared-slots-imported-only", "only an imported script's column without a cardinality is a slot of size 0",
           "codegen/graph/build.py", 'return ctx.features.source_kind == "imported" and reader_passes_slot_sizes(ctx)',
           "return reader_passes_slot_sizes(ctx)", "imported_scripts", files=("tests/test_shared_slots.py",)),
    Mutant("collection-reader-offset", "a collection's keys carry the Parquet reader's slot offset, no other",
           "codegen/model/torch_collection.py", 'out[s.name] = start if fmt == "Parquet" and sizes else 0',
           "out[s.name] = 0", "reader_offset", files=("tests/test_collection_torch.py",)),
    Mutant("collection-average", "a collection's average divides by the sample's keys, not the bag's width",
           "codegen/runtime/collection.py", 'COMBINER_MODES = {"sum": "sum", "average": "mean"}',
           'COMBINER_MODES = {"sum": "sum", "average": "sum"}', "hugectrs_definition",
           files=("tests/test_collection_torch.py",)),
    Mutant("collection-dynamic-base", "a dynamic table holds its inputs' keys from the smallest, row = key - base",
           "codegen/model/torch_collection.py", "bases[t] = min(offsets[b] for b in bottoms)", "bases[t] = 0",
           "dynamic_table_holds", files=("tests/test_collection_torch.py",)),
    Mutant("collection-capacity", "a slot sized from the data keeps its ids below its static collection table's rows",
           "codegen/model/torch_collection.py", "if b == bottom and rows[t] >= 0", "if b == bottom and rows[t] < 0",
           "sized_from_the_data", files=("tests/test_collection_torch.py",)),
    Mutant("collection-average-empty", "a collection's average of a sample with no key is HugeCTR's 0 / 0 (NaN)",
           "codegen/runtime/collection.py", 'if combiner == "average":   # a sample with no key',
           'if False:   # a sample with no key', "hugectrs_definition", files=("tests/test_collection_torch.py",)),
    Mutant("shared-slot-bound", "a slot of size 0 takes the ids of the slot whose rows it shares",
           "codegen/runtime/data.py", 'bound = rows[c["shares"]] if c.get("shares") else c["cardinality"]',
           'bound = c["cardinality"]', "shared_slot", files=("tests/test_shared_slots.py",)),
    Mutant("shared-run-scan", "a run of slots of size 0 ending its input counts only its last slot's ids",
           "codegen/runtime/row_counts.py", "largest[a] = max(largest[a], largest.pop(n))", "largest.pop(n)",
           "ending_their_input", files=("tests/test_shared_slots.py",)),
    Mutant("train-norm-data", "ctrgen train hands a Norm reader's file lists to the Parquet trainer",
           "codegen/train/launch.py", '    if spec.data.format != "parquet":', "    if False:",
           "norm_reader", files=("tests/test_train_columns_as_parquet.py",)),
    Mutant("metadata-labels-by-index", "the label columns of _metadata.json are taken by index, as HugeCTR's reader "
           "orders them", "codegen/runtime/label_names.py",
           'out = sorted((e["index"], e["col_name"]) for e in entries)',
           'out = [(e["index"], e["col_name"]) for e in entries]', "names_the_labels",
           files=("tests/test_labels_metadata.py",)),
    Mutant("metadata-label-position", "a label column of _metadata.json is the Parquet file's column at its index",
           "codegen/runtime/label_names.py", "        if at != name:", "        if False:", "disagreeing",
           files=("tests/test_labels_metadata.py",)),
    Mutant("where-node-value-mark", "a later check's line is the key's (libyaml's nodes, as the round-trip tree)",
           "codegen/specfile/load.py", "line, col, node = entry[0].start_mark.line,",
           "line, col, node = entry[1].start_mark.line,", "reads_each_example_spec",
           files=("tests/test_check_speed.py",)),
    Mutant("collection-key-range-rows", "a 3.7 - 4.0 static table holds max_key - min_key rows",
           "codegen/model/torch_collection.py",
           "t.key_range[1] - t.key_range[0] if t.rows >= 0 and t.key_range is not None else t.rows", "t.rows", "key_range_maps", files=("tests/test_collection_torch.py",)),
    Mutant("collection-key-range-base", "a 3.7 - 4.0 table's key k is its row k - min_key",
           "codegen/model/torch_collection.py", "return keys[0] if keys is not None else 0", "return 0",
           "key_range_maps", files=("tests/test_collection_torch.py",)),
    Mutant("collection-key-range-check", "keys outside a table's [min_key, max_key) are refused, not read",
           "codegen/model/torch_collection.py", "(offsets[bottom] < keys[0] or top > keys[1])", "False",
           "outside_a_tables_key_range", files=("tests/test_collection_torch.py",)),
    Mutant("ftrl-epsilon", "Ftrl takes sqrt(n + FLT_EPSILON) of the accumulator before the step (23.04+)",
           "codegen/runtime/ftrl.py", "before = (n + eps).sqrt_()", "before = n.sqrt()", "dense_step",
           files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-beta-over-lr", "Ftrl's denominator adds lambda2 + beta / lr (the kernel's lambda2 argument)",
           "codegen/runtime/ftrl.py", 'add_(hyper["lambda2"] + hyper["beta"] / lr)',
           'add_(hyper["lambda2"] + hyper["beta"])', "dense_step or collection_rows", files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-looked-up-rows", "Ftrl updates only the collection rows a batch looks up (their n and z too)",
           "codegen/runtime/ftrl.py", "hit[table.looked_up.reshape(-1)] = 1.0", "hit[:] = 1.0", "collection_rows",
           files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-epsilon-release", "HugeCTR's Ftrl kernels add FLT_EPSILON from 23.04",
           "codegen/hugectr/versions.py", '"ftrl_epsilon": _s((23, 4)),', '"ftrl_epsilon": _s((23, 12)),',
           "renders_hugectrs_step", files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-collection-release", "a static collection table updates with Ftrl from 23.06, refused before",
           "codegen/hugectr/versions.py", '"collection_static_ftrl": _s((23, 6)),',
           '"collection_static_ftrl": _s((23, 4)),', "renders_hugectrs_step", files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-collection-optimizer", "under Ftrl the collection's tables step row by row, not with the dense step",
           "codegen/runtime/optimizers.py", 'if spec.hugectr == "Ftrl" and collection:', "if False:",
           "collection_rows", files=("tests/test_torch_ftrl.py",)),
    Mutant("ftrl-sparse-embedding", "Ftrl over a SparseEmbedding is refused (HugeCTR's update has no Ftrl case)",
           "codegen/model/torch_rules.py", 'elif kind == "Ftrl" and g.embeddings:', "elif False:",
           "build_model_refuses", files=("tests/test_torch_rules.py",)),
    Mutant("stop-cuts-requests-in-flight", "a stopping server is ended only once no request is in flight",
           "codegen/serve/server.py", "            if UNLOADING in self._log_since(offset):", "            if True:",
           "stop_lets", files=("tests/test_serve.py",)),
)


def _copy_tree(dest: Path) -> Path:
    """The parts of the checkout the tests need, in dest/<checkout name> (nothing beside it: the tests stand alone)."""
    work = dest / REPO.name
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(src, work / name)
    return work


def _env(work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = str(work)     # the copy first: the checkout's editable install must not be imported
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_texts(mutants) -> list[str]:
    problems = []
    for m in mutants:
        n = (REPO / m.path).read_text(encoding="utf-8").count(m.old)
        if n != 1:
            problems.append(f"{m.name}: the text to change occurs {n} times in {m.path} (update tools/mutate.py)")
    return problems


def run_mutant(m: Mutant | None, *, timeout: int, tests: str | None = None,
               files: tuple[str, ...] = (FACTS,)) -> tuple[str, float, str]:
    """('killed' | 'survived' | 'error', seconds, detail); ``m=None``: the unchanged copy (the baseline)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctrgen-mutant-") as tmp:
        work = _copy_tree(Path(tmp))
        if m is not None:
            target = work / m.path
            target.write_text(target.read_text(encoding="utf-8").replace(m.old, m.new), encoding="utf-8")
        env = _env(work)
        specs = sorted(str(p.relative_to(work)) for p in (work / "specs").glob("*.yaml"))
        subprocess.run([sys.executable, "-m", "codegen", "generate", *specs], cwd=work, env=env,
                       capture_output=True, text=True, timeout=timeout)
        cmd = [sys.executable, "-m", "pytest", "-n0", "-q", "-x", "-p", "no:cacheprovider", "--timeout",
               str(timeout), *(m.files if m else files), "-k", tests or (m.tests if m else "")]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", time.monotonic() - start, "timeout"
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 0:
            return "survived", time.monotonic() - start, tail
        if proc.returncode == 1:
            return "killed", time.monotonic() - start, tail
        return "error", time.monotonic() - start, (proc.stdout + proc.stderr)[-400:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Change each generator fact in turn and report the ones no test "
                                             "notices.")
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per mutant")
    args = ap.parse_args(argv)
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        ap.error(f"unknown mutants {unknown}; --list shows them")
    chosen = [known[n] for n in args.names] if args.names else list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name:<24} {m.path:<38} {m.fact}{'  [issue 17]' if m.issue else ''}")
        return 0
    stale = check_texts(chosen)
    if stale:
        print("\n".join(stale), file=sys.stderr)
        return 2
    # The same tests on the unchanged copy must pass, or a "killed" would mean nothing.
    subset = " or ".join(sorted({f"({m.tests})" for m in chosen}))
    files = tuple(sorted({f for m in chosen for f in m.files}))
    state, secs, detail = run_mutant(None, timeout=args.timeout, tests=subset, files=files)
    print(f"[ 0/{len(chosen)}] baseline {'passes' if state == 'survived' else 'FAILS'} ({secs:.1f} s)  {detail}",
          flush=True)
    if state != "survived":
        print("the tests fail without any mutation: fix them first", file=sys.stderr)
        return 2
    results: dict[str, tuple[str, float, str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {m.name: pool.submit(run_mutant, m, timeout=args.timeout) for m in chosen}
        for i, m in enumerate(chosen, 1):
            results[m.name] = futures[m.name].result()
            state, secs, detail = results[m.name]
            print(f"[{i:>2}/{len(chosen)}] {state:<8} {m.name:<24} {secs:5.1f} s  {detail}", flush=True)
    survivors = [n for n, (state, _, _) in results.items() if state != "killed"]
    print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} mutants killed"
          + (f"; not killed: {', '.join(survivors)}" if survivors else "; no survivor"))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
