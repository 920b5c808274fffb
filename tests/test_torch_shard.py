"""Embedding tables sharded across ranks in the generated PyTorch trainer (--shard-tables), on the CPU over gloo.

Placement is deterministic and balanced (whole tables by bytes and lookups; split by columns where the ranks divide
vec_size) and a rank allocates only its part; a sharded lookup and row update over two and three real processes
equals one process holding the whole table (SGD, AdaGrad, Adam; one-hot and multi-hot bags, sum and mean, padding;
ranks with different batch sizes; split by columns and by tables), and the whole DLRM on N ranks (GradientSync for
the dense layers) equals one process with the global batch; the committed DLRM trainer on two ranks with sharded
tables trains the same weights as two ranks with dense tables, reaches the AUC of one rank with the doubled batch on
planted data, writes whole tables, and resumes from its checkpoint to the same weights; bad combinations are one
line, exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO
from test_torch_fast_paths import TRACED, load, synthesize
from warm_python import run_job
from warm_python import run as run_warm

pytestmark = pytest.mark.slow

DLRM = REPO / "generated" / "dlrm" / "train_torch.py"
# 20 steps at lr 4 (warmed up over the spec's 300 steps) reach the planted signal from HugeCTR's initial weights, and
# two ranks reach one rank's AUC with the doubled batch (0.0005 apart). Not lr 24, which suited torch's initial
# weights: from HugeCTR's, its steps amplify rounding (a sharded and a dense run 3e-8 apart at step 8, 4e-5 at 10,
# 1e-3 at 20), and weights compared to 1e-5 need a run that does not. The runs that check only that a placement
# trains the same weights as dense data parallel ranks stop halfway (HALF), at the dense run's checkpoint; the
# resumed run takes the last steps from the sharded run's checkpoint at RESUME.
ITERS, HALF, RESUME, BATCH = 20, 10, 15, 64
COMMON = ("--lr", "4", "--eval-batch-size", "500", "--max-eval-batches", "4")


def script_env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    return env


def torchrun(script: Path, *args: str, ranks: int = 2, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The ranks as torchrun starts them (its environment variables), without its launcher process (which imports
    torch too; tests/test_torch_target.py runs the real torchrun). stdout and stderr: every rank's, in rank order."""
    return run_job([sys.executable, str(script), *args], cwd=cwd or script.parent, env=script_env(), ranks=ranks,
                   timeout=600)


def train(data: Path, out: Path, *extra: str, ranks: int = 2, batch: int = BATCH, iters: int = ITERS) -> dict:
    args = ("--device", "cpu", "--train", str(data / "train"), "--eval", str(data / "valid"), "--max-iter",
            str(iters), "--batch-size", str(batch), "--output-dir", str(out), "--display", str(iters),
            "--eval-interval", str(iters), *COMMON, *extra)
    if ranks == 1:
        proc = run_warm([sys.executable, str(DLRM), *args], cwd=DLRM.parent, env=script_env(), timeout=600)
    else:
        proc = torchrun(DLRM, *args, ranks=ranks)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["stdout"] = proc.stdout
    return metrics


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shard")
    features = json.loads((REPO / "generated" / "dlrm" / "features.json").read_text())
    synthesize(features, 12000, root / "train", files=2)
    synthesize(features, 1001, root / "valid", files=1)      # odd: the ranks' last evaluation batches differ
    return root


# ---- placement -----------------------------------------------------------------------------------------------------

def _tables(m, cards_by_name: dict, **kwargs) -> torch.nn.Module:
    holder = torch.nn.Module()
    for name, (cards, vec) in cards_by_name.items():
        setattr(holder, name, m.SparseEmbedding(cards, vec_size=vec, combiner="sum", name=name, **kwargs))
    return holder


def _whole_and_part(m, cards_by_name: dict, placement, seed: int):
    """Table "a" built whole and as this rank's part of `placement`, each from the same torch seed."""
    torch.manual_seed(seed)
    whole = _tables(m, cards_by_name).a
    torch.manual_seed(seed)
    return whole, _tables(m, cards_by_name, placement=placement).a


def test_whole_tables_are_placed_by_bytes_and_lookups():
    m = load("dlrm")
    with torch.device("meta"):
        holder = _tables(m, {"a": ([100, 50, 50, 30, 20], 4), "b": ([60], 2)})
    placement = m.place_tables(holder, 2, 0)     # vec 4 and 2: too narrow to split by columns on 2 ranks
    assert placement.split == {"a": "tables", "b": "tables"}
    # cost = share of bytes (SGD: no row state; a0 1600, a1 800, a2 800, a3 480, b0 480, a4 320 of 4480) + share of
    # lookups (1/6 each): a0 .524 -> r0; a1 .345 -> r1; a2 -> r1 (.345 < .524); a3 .274 -> r0; b0 -> r1; a4 -> r0
    assert placement.owners == {"a": [0, 1, 1, 0, 0], "b": [1]}
    assert placement.load == [1600 + 480 + 320, 800 + 800 + 480] and placement.lookups == [3, 3]
    again = m.place_tables(holder, 2, 1)
    assert again.owners == placement.owners and again.load == placement.load    # every rank agrees
    three = m.place_tables(holder, 3, 0)
    assert three.owners == {"a": [0, 1, 2, 1, 0], "b": [2]} and three.lookups == [2, 2, 2]


def test_small_tables_do_not_all_land_on_one_rank():
    # By bytes alone the six small slots would all follow the 900-row one (one rank: 7 lookups a sample, the other 1).
    m = load("dlrm")
    with torch.device("meta"):
        holder = _tables(m, {"a": ([1000, 900] + [10] * 6, 2)})
    placement = m.place_tables(holder, 2, 0)
    assert placement.owners == {"a": [0, 1, 1, 0, 1, 0, 1, 0]} and placement.lookups == [4, 4]
    assert "4 lookups per sample" in m.describe_placement(placement)[0]


def test_a_table_the_ranks_divide_is_split_by_columns():
    m = load("dlrm")
    cards = {"a": ([100, 50, 7], 8)}
    with torch.device("meta"):
        placement = m.place_tables(_tables(m, cards), 2, 1)
    assert placement.split == {"a": "columns"} and placement.load == [157 * 8 * 4 // 2] * 2
    assert placement.lookups == [3, 3] and all(t["rank"] == "all" for t in placement.tables)
    assert "every slot, columns 4-7" in m.describe_placement(placement)[1]
    assert m.place_tables(_tables(m, cards), 2, 1, split="tables").split == {"a": "tables"}
    whole, part = _whole_and_part(m, cards, placement, 7)
    assert part.weight.shape == (158, 4) and part.shard.columns == (4, 8)
    assert torch.equal(part.weight.detach(), whole.weight.detach()[:, 4:])    # the same start as the whole table
    assert torch.equal(part.shard.own(whole.weight.detach()), part.weight.detach())
    part.load_state_dict(whole.state_dict())
    assert torch.equal(part.weight.detach(), whole.weight.detach()[:, 4:])


def test_small_slots_of_a_column_split_table_are_replicated():
    # auto with replicate_rows 50: slots 0, 2 and 3 (7, 40 and 5 rows) whole on every rank, slot 1 (300) by columns
    m = load("dlrm")
    cards = {"a": ([7, 300, 40, 5], 8)}
    with torch.device("meta"):
        placement = m.place_tables(_tables(m, cards), 2, 1, replicate_rows=50)
    assert placement.split == {"a": "columns"} and placement.replicated == {"a": [0, 2, 3]}
    assert placement.load == [300 * 8 * 4 // 2 + 52 * 8 * 4] * 2
    assert placement.lookups == [1 + 3 / 2] * 2          # its own samples' ids of each replicated slot
    line = m.describe_placement(placement)[1]
    assert "the other slots, columns 4-7" in line       # gradient: (52 rows + the padding row) x 8 x 4 bytes
    assert "slot(s) 0, 2, 3 whole (replicated; gradient: all_reduce of 1.7 KiB a step)" in line
    for split in ("columns", "tables"):                  # any split replicates what replicate_rows says
        assert m.place_tables(_tables(m, cards), 2, 1, split=split, replicate_rows=50).replicated == {"a": [0, 2, 3]}
        assert m.place_tables(_tables(m, cards), 2, 1, split=split).replicated == {"a": []}
    whole, part = _whole_and_part(m, cards, placement, 7)
    # 300 rows of 4 columns, then 52 whole rows and their padding row as 2 rows of 4 each, then the padding row
    assert part.weight.shape == (300 + 53 * 2 + 1, 4) and part.padding_row == 406
    w, full = part.weight.detach(), whole.weight.detach()
    assert torch.equal(w[:300], full[7:307, 4:])                                     # slot 1, columns 4-7
    replica = part.shard.replica(w)
    assert replica.shape == (53, 8) and replica.data_ptr() == w[300:].data_ptr()     # a view of the weight
    assert torch.equal(replica[:52], torch.cat([full[:7], full[307:352]]))           # slots 0, 2, 3 whole
    assert torch.count_nonzero(replica[-1]) == 0 and torch.count_nonzero(w[-1]) == 0
    assert torch.equal(part.shard.own(full), w)
    part.load_state_dict(whole.state_dict())                                         # a whole table's checkpoint
    assert torch.equal(part.weight.detach(), w)
    # a lookup of every slot: the whole table's vectors, in slot order (the replicated ones from the replica)
    ids = torch.tensor([[[6], [299], [39], [4]], [[0], [0], [0], [0]]])
    assert part.slot_inverse.tolist() == [1, 0, 2, 3] and part.slot_order.tolist() == [1, 0, 2, 3]
    rows = (ids.index_select(1, torch.tensor([0, 2, 3]))[..., 0] + torch.tensor([0, 7, 47])).reshape(-1)
    assert torch.equal(part.rows_lookup(rows, 1, replica=True).reshape(2, 3, 8),
                       whole.weight.detach()[(ids[..., 0] + whole.slot_offsets)[:, [0, 2, 3]]])


def test_a_long_slot_starts_the_same_whole_or_split():
    # rows past INIT_ROWS come from a generator per chunk, drawn whole and then cut to the rank's columns
    m = load("dlrm")
    layers = sys.modules[m.SparseEmbedding.__module__]
    cards = {"a": ([5, 23], 8)}
    old, layers.INIT_ROWS = layers.INIT_ROWS, 10
    try:
        with torch.device("meta"):
            placement = m.place_tables(_tables(m, cards), 2, 0)
        whole, part = _whole_and_part(m, cards, placement, 3)
    finally:
        layers.INIT_ROWS = old
    assert torch.equal(part.weight.detach(), whole.weight.detach()[:, :4])
    assert not torch.equal(whole.weight[5:15], whole.weight[15:25])    # chunks of a slot differ


def test_dlrm_placement_is_balanced():
    m = load("dlrm")
    features = json.loads((REPO / "generated" / "dlrm" / "features.json").read_text())
    with torch.device("meta"):
        model = m.Model(features)
    for size in (2, 3, 4):
        placement = m.place_tables(model, size, 0)
        largest = max(t["bytes"] for t in placement.tables)
        assert sorted(t["rank"] for t in placement.tables) != [0] * len(placement.tables)
        assert max(placement.load) - min(placement.load) <= largest
        assert sum(placement.load) == sum(t["bytes"] for t in placement.tables)


def test_a_rank_allocates_only_its_tables_and_they_start_as_in_the_whole_table():
    m = load("dlrm")
    cards = {"a": ([100, 50, 50, 30, 20], 4)}
    with torch.device("meta"):
        placement = m.place_tables(_tables(m, cards), 2, 1)
    whole, part = _whole_and_part(m, cards, placement, 7)
    assert part.shard.slots == [1, 2, 4] and part.weight.shape == (50 + 50 + 20 + 1, 4)
    assert torch.equal(part.weight[:100], whole.weight[100:200])       # slots 1 and 2 of the whole table
    assert torch.equal(part.weight[100:120], whole.weight[230:250])    # slot 4
    assert torch.count_nonzero(part.weight[-1]) == 0                    # its own padding row
    assert torch.equal(part.shard.own(whole.weight.detach()), part.weight.detach())
    state = whole.state_dict()
    part.load_state_dict(state)                                         # a whole table's checkpoint loads
    assert torch.equal(part.weight.detach(), whole.weight.detach()[list(range(100, 200)) + list(range(230, 251))])


def test_only_a_table_that_interactions_alone_read_yields_its_shards_order():
    # take_shard_orders reads the Model's forward (torch.fx): a sharded table whose output only Interactions read
    # yields its slots in the shard's order; another reader of the output (a reshape), a forward it cannot trace,
    # a table in slot order already or one process leave every table in slot order
    m = load("dlrm")
    cards = [7, 300, 40, 5]
    with torch.device("meta"):
        placement = m.place_tables(_tables(m, {"a": (cards, 8)}), 2, 0, replicate_rows=50)

    class Reads(torch.nn.Module):
        def __init__(self, also: str | None, placement=placement):
            super().__init__()
            self.also = also
            self.a = m.SparseEmbedding(cards, 8, "sum", name="a", placement=placement)
            self.i = m.Interaction(num_features=5)

        def forward(self, dense, ids):
            e = self.a(ids)
            out = self.i(dense, e)
            if self.also == "reshape":
                return out.sum() + e.reshape(e.shape[0], -1).sum()
            if self.also == "branch":
                return out if dense.sum() > 0 else -out     # (not traceable: control flow on a value)
            return out

    model = Reads(None)
    assert model.a.shard.order == [1, 0, 2, 3]
    assert m.take_shard_orders(model) == ["a: its slots go to i in the shard's order (no gather into slot order)"]
    assert model.a.shard_order and model.i.order == [1, 0, 2, 3]
    for unchanged in (Reads("reshape"), Reads("branch"), Reads(None, placement=None)):
        assert m.take_shard_orders(unchanged) == []
        assert not unchanged.a.shard_order and unchanged.i.order is None
    with torch.device("meta"):
        in_order = m.place_tables(_tables(m, {"a": (cards, 8)}), 2, 0)    # every slot split: already in slot order
    assert m.take_shard_orders(Reads(None, placement=in_order)) == []


# ---- two processes: the sharded lookup and update ------------------------------------------------------------------

WORKER = r'''
import importlib.util, sys
import torch, torch.distributed as dist
sys.path.insert(0, sys.argv[2])   # tests/: trainer_view
from trainer_view import view
m = view(sys.argv[1], "train_torch")
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
vec, lr = 4 * size, 0.05     # 8 on 2 ranks, 12 on 3: each rank 4 columns when split by columns
# as the trainer's setup: the gradients' all_reduces (replicas, dense layers) on a communicator of their own
m.open_reduce_group()
reduce_group, groups, all_reduce = m.reduce_group(), [], dist.all_reduce
assert reduce_group is not None and reduce_group != dist.group.WORLD
dist.all_reduce = lambda *args, **kwargs: groups.append(kwargs.get("group")) or all_reduce(*args, **kwargs)
hypers = {"SGD": {}, "AdaGrad": {"initial_accumulator_value": 0.1, "eps": 1e-7},
          "Adam": {"betas": (0.9, 0.999), "eps": 1e-7}}
checked = 0
seed = torch.default_generator.manual_seed    # (torch.manual_seed also queues CUDA's seeding with a stack trace)
cases = [(cards, kind, nnz, combiner, split) for cards in ([7, 40, 300, 5], [6])    # [6]: rank 1 owns no slot
         for kind in hypers for nnz, combiner in ((1, "sum"), (3, "sum"), (3, "mean"))
         for split in ("tables", "columns", "replicated", "tables+replicated")]


def table(cards, combiner, kind, placement):
    seed(3)
    t = m.SparseEmbedding(cards, vec_size=vec, combiner=combiner, name="t", placement=placement)
    t.row_updates = True
    t.weight.requires_grad_(False)
    return t, m.RowSparseOptimizer([t], lr, kind, hypers[kind])


def steps(cards, nnz):
    """Two steps' batches of every rank and their targets (the second step reads the optimizer state of the first,
    and rows the first looked up and the second did not tell a lazy optimizer from a dense one)."""
    gen = torch.Generator().manual_seed(11)
    out = []
    for step in range(2):
        batches = [torch.stack([torch.randint(0, c, (16, nnz), generator=gen) for c in cards], dim=1)
                   for _ in range(size)]
        for b in batches:
            b[:4, -1, 0] = 4                                  # repeated rows across ranks add up
            if nnz > 1:
                b[torch.rand(b.shape, generator=gen) < 0.3] = -1
        out.append((batches, [torch.randn(16, len(cards), vec, generator=gen) for _ in range(size)]))
    return out


wholes = {}     # one process's table after the steps: the same for every split of a table, optimizer and lookup
for cards, kind, nnz, combiner, split in cases:
    key = (tuple(cards), kind, nnz, combiner)
    if key not in wholes:
        data = steps(cards, nnz)
        whole, whole_opt = table(cards, combiner, kind, None)
        for batches, targets in data:
            # one rank's loss is its batch's; DDP averages the ranks' gradients: the whole table sees the mean
            whole_opt.zero_grad()
            ((whole(torch.cat(batches)) - torch.cat(targets)) ** 2).sum().div(size).backward()
            whole_opt.step()
        wholes[key] = data, whole, whole_opt
    data, whole, whole_opt = wholes[key]
    holder = torch.nn.Module()
    with torch.device("meta"):
        holder.t = m.SparseEmbedding(cards, vec_size=vec, combiner=combiner, name="t")
    # replicated: split by columns, the slots of at most 50 rows (all of [6]; 7, 40 and 5 of the four) replicated;
    # tables+replicated: the same slots replicated, the others whole on one rank
    placement = m.place_tables(holder, size, rank, split={"replicated": "auto", "tables+replicated": "tables"}.get(
        split, split), replicate_rows=50 if "replicated" in split else 0)
    assert placement.split["t"] == ("columns" if split in ("columns", "replicated") else "tables")
    assert placement.replicated["t"] == ([] if "replicated" not in split else [0, 1, 3] if len(cards) == 4 else [0])
    if split == "tables" and size == 2:
        assert placement.owners["t"] == ([1, 1, 0, 1] if len(cards) == 4 else [0])   # 300 -> 0, 40, 7, 5 -> 1
    part, part_opt = table(cards, combiner, kind, placement)
    for batches, targets in data:
        part_opt.zero_grad()
        ((part(batches[rank]) - targets[rank]) ** 2).sum().backward()
        part_opt.step()
    for name, local, full in [("weight", part.weight.detach(), whole.weight.detach())] + [
            (key, value, whole_opt.state[0][key]) for key, value in part_opt.state[0].items()]:
        gathered = m.full_rows(part, local)
        if rank == 0:
            assert torch.allclose(gathered, full, atol=1e-6, rtol=1e-5), (split, kind, nnz, combiner, name,
                                                                          (gathered - full).abs().max())
    # evaluation: ranks with different batch sizes (rank 1 has 5 rows)
    with torch.no_grad():
        ids = data[-1][0][rank][:16 if rank == 0 else 5]
        placement.sizes = [16] + [5] * (size - 1)
        got = part(ids)
        placement.sizes = None
        assert torch.allclose(got, whole(ids), atol=1e-6), (split, kind, nnz, combiner, "eval")
    checked += 1
# The whole DLRM: the ranks (tables split by columns, and whole; dense layers averaged by GradientSync) against one
# process with the global batch, two SGD steps.
import json
features = json.loads(open(sys.argv[3]).read())
cards = [c["cardinality"] for c in features["sparse"][0]["columns"]]
gen = torch.Generator().manual_seed(2)
dlrm_steps = [(torch.rand(8 * size, 13, generator=gen),
               torch.stack([torch.randint(0, c, (8 * size, 1), generator=gen) for c in cards], dim=1),
               (torch.rand(8 * size, 1, generator=gen) < 0.5).float()) for step in range(2)]
bce = torch.nn.functional.binary_cross_entropy_with_logits
seed(5)
whole = m.Model(features)
whole_opt = m.make_optimizer(whole, 0.5, row_updates=True)
for dense, ids, label in dlrm_steps:
    whole_opt.zero_grad()
    bce(whole(dense, ids), label).backward()
    whole_opt.step()
theirs = whole.state_dict()
runs = set()
# Each also with the Interaction taking the slots in the shard's order (take_shard_orders, as the trainer does).
for split, in_shard_order in [(split, in_order) for split in ("columns", "tables", "replicated", "tables+replicated")
                              for in_order in (False, True)]:
    with torch.device("meta"):      # the 13 slots of at most 140 rows replicated (auto on 3 ranks: whole tables)
        placement = m.place_tables(m.Model(features), size, rank, split={"replicated": "auto", "tables+replicated":
                                   "tables"}.get(split, split), replicate_rows=140 if "replicated" in split else 0)
    assert sum(map(len, placement.replicated.values())) == (13 if "replicated" in split else 0)
    same = (json.dumps([placement.split, placement.owners, placement.replicated]), in_shard_order, split == "tables")
    if same in runs:     # (on 3 ranks auto splits by tables: "replicated" is "tables+replicated")
        continue
    runs.add(same)
    seed(5)
    part = m.Model(features, placement)
    part_opt = m.make_optimizer(part, 0.5, row_updates=True)
    if in_shard_order:    # (every slot split by columns on 2 ranks: in slot order already)
        sorted_order = part.sparse_embedding1.shard.order == sorted(part.sparse_embedding1.shard.order)
        assert len(m.take_shard_orders(part)) == (0 if sorted_order else 1), split
        assert part.interaction1.order == (None if sorted_order else part.sparse_embedding1.shard.order)
    sync = m.GradientSync(list(part.parameters()))
    if split == "tables":
        sync.FLAT_BYTES = 1 << 14    # the dense layers' larger gradients are then averaged in place, one by one
        assert any(p.numel() * 4 > sync.FLAT_BYTES for p in sync.params)
    rows = slice(8 * rank, 8 * rank + 8)
    for dense, ids, label in dlrm_steps:
        part_opt.zero_grad()
        bce(part(dense[rows], ids[rows]), label[rows]).backward()
        sync(later=True)      # as the trainer's step: the all_reduce is waited for by opt.step()
        part_opt.step()
    for key, value in m.model_state(part).items():
        if rank == 0:
            assert torch.allclose(value, theirs[key], atol=1e-5), (split, in_shard_order, key,
                                                                   (value - theirs[key]).abs().max())
    checked += 1
# Tables every rank holds whole and updates whole (dense SGD, no sharding): their gradient from every rank's
# looked-up rows (SharedRowsGrad), the dense layers' by GradientSync; two steps against one process.
models = []
for _ in range(2):
    seed(5)
    model = m.Model(features)
    models.append((model, m.make_optimizer(model, 0.5)))
(part, part_opt), (whole, whole_opt) = models
lines = m.share_gradients(part, features, size, 8)
assert part.sparse_embedding1.shared_grad and "all_gather of every rank's looked-up rows" in lines[0], lines
shared = part.sparse_embedding1.weight
sync = m.GradientSync([p for p in part.parameters() if p is not shared])
for step in range(2):
    dense = torch.rand(8 * size, 13, generator=gen)
    ids = torch.stack([torch.randint(0, c, (8 * size, 1), generator=gen) for c in cards], dim=1)
    ids[:4, 0, 0] = 1                                 # rows that several ranks look up add up
    label = (torch.rand(8 * size, 1, generator=gen) < 0.5).float()
    for model, opt, rows in ((whole, whole_opt, slice(None)), (part, part_opt, slice(8 * rank, 8 * rank + 8))):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(model(dense[rows], ids[rows]), label[rows]).backward()
        if model is part:
            sync()
        opt.step()
theirs = whole.state_dict()
for key, value in part.state_dict().items():
    assert torch.allclose(value, theirs[key], atol=1e-5), ("shared", key, (value - theirs[key]).abs().max())
checked += 1
assert groups and all(g is reduce_group for g in groups), groups
print(f"rank {rank}: {checked} cases equal", flush=True)
dist.barrier()
m.close_process_group()
'''


@pytest.mark.parametrize("ranks", [2, 3])
def test_sharded_lookup_and_row_update_equal_one_whole_table(tmp_path, ranks):
    """Seconds: 81 cases (table shapes x optimizers x lookups x splits, the whole DLRM) on real gloo ranks, each
    compared with one process (computed once for the cases that share it)."""
    worker = tmp_path / "shard_worker.py"
    worker.write_text(WORKER)
    proc = torchrun(worker, str(DLRM), str(REPO / "tests"), str(DLRM.with_name("features.json")), cwd=tmp_path,
                    ranks=ranks)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    for rank in range(ranks):     # 72 tables, 8 DLRM placements (on 3 ranks 6 differ), the shared table
        assert f"rank {rank}: {81 if ranks == 2 else 79} cases equal" in proc.stdout, proc.stdout[-2000:]


# ---- the DLRM trainer on two ranks ---------------------------------------------------------------------------------

def test_sharded_dlrm_trains_as_ddp_and_as_one_rank(data, tmp_path):
    """Seconds: six DLRM trainings on two gloo ranks (sharded by columns, dense data parallel and one rank 20 steps;
    by tables and with replicas 10, a resumed run 5); fewer steps would not reach the planted signal the AUC check
    needs (10 steps at a higher lr: one rank 0.07 below two)."""
    sharded = train(data, tmp_path / "sharded", "--snapshot", str(RESUME))
    by_tables = train(data, tmp_path / "tables", "--table-split", "tables", "--snapshot", "0", iters=HALF)
    replicas = train(data, tmp_path / "replicas", "--table-split", "tables", "--replicate-rows", str(BATCH),
                     "--snapshot", "0", iters=HALF)
    # evaluated and checkpointed halfway too: the reference of the runs that stop there
    dense = train(data, tmp_path / "dense", "--shard-tables", "off", "--embedding-update", "dense",
                  "--snapshot", str(HALF), "--eval-interval", str(HALF))
    records = [json.loads(line) for line in (tmp_path / "dense" / "metrics.jsonl").read_text().splitlines()]
    dense_half = next(r["value"] for r in records if r["step"] == HALF and r["tag"] == "eval/auc")
    one = train(data, tmp_path / "one", "--lr", "8", "--snapshot", "0", ranks=1, batch=2 * BATCH)
    assert sharded["shard_tables"] is True and sharded["embedding_update"] == "rows"
    assert dense["shard_tables"] is False and dense["embedding_update"] == "dense"
    assert "tables sharded over 2 ranks" in sharded["stdout"] and "rank 1: " in sharded["stdout"]
    cards = [c["cardinality"] for c in json.loads(DLRM.with_name("features.json").read_text())["sparse"][0]["columns"]]
    # split by columns (vec 128, auto): every rank holds every row, 64 columns of it, except the slots of at most
    # --batch-size rows, which every rank holds whole (as two 64-column rows each, with a padding row of theirs)
    assert sharded["sharding"]["split"] == {"sparse_embedding1": "columns"}
    small = [s for s, c in enumerate(cards) if c <= BATCH]
    assert sharded["sharding"]["replicated"] == {"sparse_embedding1": small} and 0 < len(small) < len(cards)
    whole = sum(cards[s] for s in small) + 1
    assert sharded["sharding"]["local_shape_per_rank"] == [[[sum(cards) + 1 - (whole - 1) + 2 * whole, 64]]] * 2
    assert "the other slots, columns 64-127" in sharded["stdout"]
    assert f"slot(s) {', '.join(map(str, small))} whole (replicated; gradient: all_reduce of " in sharded["stdout"]
    # split by tables: each rank allocated only its slots (+ its padding row)
    assert by_tables["sharding"]["split"] == {"sparse_embedding1": "tables"}
    owned = [sum(c for c, t in zip(cards, by_tables["sharding"]["tables"]) if t["rank"] == r) + 1 for r in (0, 1)]
    assert [shape[0] for shape in by_tables["sharding"]["local_shape_per_rank"]] == [[rows, 128] for rows in owned]
    assert min(owned) > 1 and sum(owned) == sum(cards) + 2
    lookups = by_tables["sharding"]["lookups_per_sample_per_rank"]
    assert sum(lookups) == len(cards) and max(lookups) - min(lookups) <= 1    # not most lookups on one rank
    # by tables with the small slots replicated: each rank its large slots, then every small slot whole, then a
    # padding row of theirs and its own
    assert replicas["sharding"]["split"] == {"sparse_embedding1": "tables"}
    assert replicas["sharding"]["replicated"] == {"sparse_embedding1": small}
    large = [sum(c for s, (c, t) in enumerate(zip(cards, replicas["sharding"]["tables"])) if t["rank"] == r)
             for r in (0, 1)]
    assert [shape[0] for shape in replicas["sharding"]["local_shape_per_rank"]] == [[rows + whole + 1, 128]
                                                                                   for rows in large]
    assert min(large) > 0 and sum(large) == sum(cards) - (whole - 1)
    assert f"slots of at most {BATCH} rows replicated" in replicas["stdout"]
    assert f"slot(s) {', '.join(map(str, small))} whole (replicated; gradient: all_reduce of " in replicas["stdout"]
    assert len(sharded["peak_memory_bytes_per_rank"]) == 2
    # the same weights as data parallel ranks with dense tables (whole tables in model.pt) after as many steps
    full = torch.load(tmp_path / "dense" / "model.pt")
    half = torch.load(tmp_path / "dense" / f"checkpoint_{HALF}.pt", weights_only=False)["model"]
    assert by_tables["iterations"] == replicas["iterations"] == HALF
    for run, b in (("sharded", full), ("tables", half), ("replicas", half)):
        a = torch.load(tmp_path / run / "model.pt")
        assert a.keys() == b.keys() and a["sparse_embedding1.weight"].shape == (sum(cards) + 1, 128)
        for key in a:
            assert torch.allclose(a[key], b[key], atol=1e-5, rtol=1e-4), (run, key, (a[key] - b[key]).abs().max())
    a, b = torch.load(tmp_path / "sharded" / "model.pt"), full
    assert abs(sharded["train_loss"] - dense["train_loss"]) < 1e-4
    print(f"AUC sharded {sharded['auc']}, DDP dense {dense['auc']}, one rank {one['auc']}; largest weight difference "
          f"sharded vs dense {max((a[k] - b[k]).abs().max().item() for k in a):.2e}")
    # the planted signal, as one rank with the doubled batch (other batches: not the same weights)
    assert sharded["auc"] > 0.6, sharded["auc"]
    assert abs(sharded["auc"] - dense["auc"]) < 1e-4 and abs(by_tables["auc"] - dense_half) < 1e-4
    assert abs(sharded["auc"] - one["auc"]) < 0.02, (sharded["auc"], one["auc"])
    # the exported model loads into Model as it is (serving needs no sharding)
    m = load("dlrm")
    model = m.Model(json.loads(DLRM.with_name("features.json").read_text()))
    model.load_state_dict(a)

    # resume from the sharded checkpoint (whole tables): the same next steps, so the same final weights
    checkpoint = torch.load(tmp_path / "sharded" / f"checkpoint_{RESUME}.pt", weights_only=False)
    assert checkpoint["model"]["sparse_embedding1.weight"].shape == (sum(cards) + 1, 128)
    resumed = train(data, tmp_path / "resumed", "--resume", str(tmp_path / "sharded" / f"checkpoint_{RESUME}.pt"),
                    "--snapshot", "0", iters=ITERS - RESUME)
    assert resumed["iterations"] == ITERS and "resumed from" in resumed["stdout"]
    c = torch.load(tmp_path / "resumed" / "model.pt")
    for key in a:
        assert torch.equal(a[key], c[key]), (key, (a[key] - c[key]).abs().max())


# ---- refusals ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("script,extra,expected", [
    ("movielens", ("--shard-tables", "on"), "--shard-tables on: the spec's optimizer Adam with its update_type "
                                             "updates every row of the tables"),
    ("dlrm", ("--shard-tables", "on", "--embedding-update", "dense"),
     "--shard-tables on: a sharded table is updated row by row by its owner, not with --embedding-update dense "
     "(fix: --shard-tables off, or --embedding-update auto)"),
    ("dlrm", ("--replicate-rows", "-1"), "--replicate-rows -1: a number of rows, 0 or more (fix: --replicate-rows 0 "
                                         "replicates no slot)"),
])
def test_bad_combinations_are_one_line(data, tmp_path, script, extra, expected):
    path = REPO / "generated" / script / "train_torch.py"
    proc = run_warm([sys.executable, str(path), "--device", "cpu", "--train", str(data / "train"), "--eval",
                     str(data / "valid"), "--max-iter", "2", "--output-dir", str(tmp_path / "out"), *extra],
                    cwd=path.parent, env=script_env(), timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: " + expected) and "(fix: " in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_row_updates_on_ranks_without_sharding_say_how(data, tmp_path):
    proc = torchrun(DLRM, "--device", "cpu", "--train", str(data / "train"), "--eval", str(data / "valid"),
                    "--max-iter", "2", "--output-dir", str(tmp_path / "out"), "--embedding-update", "rows",
                    "--shard-tables", "off")
    assert proc.returncode != 0
    assert ("error: --embedding-update rows: row updates run on one rank, not 2, unless the tables are sharded "
            "(fix: --embedding-update dense, or --shard-tables auto)") in proc.stderr


def test_a_cuda_graph_over_gloo_is_refused_in_one_line(data, tmp_path):
    # gloo exchanges through host memory, which a CUDA graph cannot capture (NCCL ranks capture the step)
    proc = torchrun(DLRM, "--device", "cpu", "--train", str(data / "train"), "--eval", str(data / "valid"),
                    "--max-iter", "2", "--output-dir", str(tmp_path / "out"), "--cuda-graph", "on")
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert lines and all(line == lines[0] for line in lines), proc.stderr[-2000:]
    assert lines[0].startswith("error: --cuda-graph on: the gloo backend exchanges through host memory") and \
        "(fix: --dist-backend nccl with a GPU per rank, or --cuda-graph off)" in lines[0]
    assert not (tmp_path / "out").exists() and proc.stdout == ""     # refused before the ranks met (no log line)


def test_assembled_vectors_are_in_slot_order_eager_and_compiled():
    # a shard's lookup yields the split slots' columns as exchanged (rank-major) and the replicated slots apart, or
    # (tables) the slots in owner order; assemble interleaves the columns and puts the slots in slot order, a gather
    # both ways, traced whole by torch.compile (the trainer compiles it with the layers that read it). The exchanged
    # parts' gradients come back averaged over the 2 ranks and contiguous, as ExchangeRows sends them
    """Seconds: torch.compile (Dynamo and AOT autograd) traces the assembly of two placements."""
    m = load("dlrm")
    cards = {"a": ([7, 300, 40, 5], 8)}
    with torch.device("meta"):
        columns = m.place_tables(_tables(m, cards), 2, 0, replicate_rows=50)    # slot 1 split, 0 2 3 replicated
        tables = m.place_tables(_tables(m, cards), 2, 0, split="tables")
    gen = torch.Generator().manual_seed(3)
    batch = 5
    whole = torch.randn(batch, 4, 8, generator=gen)          # the vectors one process would look up
    weights = torch.randn(batch, 4, 8, generator=gen)        # d loss / d vectors

    def rank_major(x):                                       # slot 1's columns 0-3 of every sample, then 4-7
        return torch.stack([x[:, [1], :4], x[:, [1], 4:]]).reshape(-1, 4)

    for placement in (columns, tables):
        table = _tables(m, cards, placement=placement).a
        order = table.slot_order.tolist()
        if placement is columns:
            assert order == [1, 0, 2, 3]
            given, expected = (rank_major(whole), whole[:, [0, 2, 3]]), (rank_major(weights) / 2, weights[:, [0, 2, 3]])
        else:
            assert sorted(order) == [0, 1, 2, 3]
            given, expected = (whole.transpose(0, 1)[order],), (weights.transpose(0, 1)[order] / 2,)
        for fn in (table.shard.assemble, torch.compile(table.shard.assemble, fullgraph=True, backend=TRACED)):
            leaves = tuple(part.clone().requires_grad_() for part in given)
            out = fn(table, leaves if placement is columns else (leaves[0], None))
            (out * weights).sum().backward()
            assert torch.equal(out.detach(), whole)
            assert all(torch.equal(leaf.grad, grad) for leaf, grad in zip(leaves, expected))
            assert leaves[0].grad.is_contiguous()


def _backward_nodes(out: torch.Tensor) -> set:
    seen, todo = set(), [out.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            todo += [next_fn for next_fn, _ in fn.next_functions]
    return {type(fn).__name__ for fn in seen}


@pytest.mark.parametrize("in_shard_order", [False, True], ids=["slot-order", "shard-order"])
@pytest.mark.parametrize("split", ["columns", "tables"])
def test_a_sharded_tables_assembly_is_compiled_with_the_layers_that_read_it(monkeypatch, split, in_shard_order):
    """Seconds for the first case of a process: torch.compile (Dynamo and AOT autograd, aot_eager) traces the
    assembly with the Interaction, forward and backward."""
    # the trainer compiles the model with the tables' lookups and exchanges eager (fetch); assemble must be traced
    # with the Interaction: a compiled graph that ends in the assembled (batch, slots, vec) vectors gets their gradient
    # copied contiguous each step (0.26 ms of a 2-rank Criteo-Kaggle step). With take_shard_orders (the trainer's,
    # on several ranks) the Interaction takes the slots in the shard's order: the same output and gradients, and no
    # gather of the slots into slot order either way (its backward wrote the replicated slots' whole gradient)
    monkeypatch.setattr(torch._dynamo.config, "nested_graph_breaks", False)   # the trainer's setting, not the test's
    torch._dynamo.reset()
    m = load("dlrm")
    features = json.loads((REPO / "generated" / "dlrm" / "features.json").read_text())
    with torch.device("meta"):
        placement = m.place_tables(m.Model(features), 2, 0, split=split, replicate_rows=100)
    torch.manual_seed(4)
    model = m.Model(features, placement)
    table = model.sparse_embedding1
    if in_shard_order:
        assert m.take_shard_orders(model) == ["sparse_embedding1: its slots go to interaction1 in the shard's order "
                                              "(no gather into slot order)"]
        assert table.shard_order and model.interaction1.order == table.shard.order != sorted(table.shard.order)
    shard, batch = table.shard, 6
    slots, vec = len(shard.cardinalities), shard.vec_size
    assert shard.replicated and len(shard.replicated) < slots    # both parts: exchanged and replicated
    others = slots - len(shard.replicated)
    whole = torch.randn(batch, slots, vec)                     # the vectors one process would look up
    if split == "columns":
        split_part = whole[:, shard.order[:others]].reshape(batch, others, 2, -1).permute(2, 0, 1, 3)
        parts = (split_part.reshape(-1, shard.width), whole[:, shard.order[others:]])
    else:
        parts = (whole[:, shard.order[:others]].transpose(0, 1).contiguous(), whole[:, shard.order[others:]])
    leaves = [p.clone().requires_grad_() for p in parts]
    assert torch.equal(shard.assemble(table, tuple(leaves)).detach(), whole)   # (the parts as a rank gets them)
    dense = torch.rand(batch, 13)
    ids = torch.zeros(batch, slots, 1, dtype=torch.int64)
    table.fetch = lambda ids: tuple(leaves)        # (no ranks here: the exchanged parts as given)
    eager = model(dense, ids)
    assert ("SlotOrderBackward" in _backward_nodes(eager)) is not in_shard_order
    eager.sum().backward()
    if in_shard_order:     # the same as the Model in slot order (its own copy, the same weights)
        torch.manual_seed(4)
        twin = m.Model(features, placement)
        twin_leaves = [p.clone().requires_grad_() for p in parts]
        twin.sparse_embedding1.fetch = lambda ids: tuple(twin_leaves)
        expected = twin(dense, ids)
        expected.sum().backward()
        assert torch.equal(eager.detach(), expected.detach())
        assert all(torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in zip(leaves, twin_leaves))
    eager_grads = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None

    outputs = []

    def backend(gm, example_inputs):
        def run(*args):
            out = gm(*args)
            outputs.append([tuple(o.shape) for o in out if isinstance(o, torch.Tensor)])
            return out
        return run

    net = m.compile_model(model, torch.device("cpu"), backend=backend)     # fetch: eager, as the trainer's
    out = net(dense, ids)
    out.sum().backward()
    assert torch.allclose(out, eager, atol=1e-6)
    assert outputs, "compiled graphs ran"
    assert all((batch, slots, vec) not in shapes for shapes in outputs), outputs
    assert all(torch.allclose(leaf.grad, g, atol=1e-6) for leaf, g in zip(leaves, eager_grads))
