"""A generated train_torch.py together with the runtime it calls, under the names the trainer tests use.

The generated file holds its model's facts (Model, JOB, LAYOUT, ...); the machinery is codegen.runtime's. ``view``
imports the file by path and returns one namespace with both: the runtime's names, the file's names, the spec's
values as the file gives them to the runtime (DEFAULTS, ROW_UPDATE, PASS_UPDATE, PASS_UPDATE_HYPER), and
``make_optimizer`` / ``place_tables`` / ``load_features`` bound to the file's optimizer and layout."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path


def view(path: Path, module_name: str | None = None) -> types.SimpleNamespace:
    from codegen.runtime import (compiled, data, dense_optim, distributed, evaluation, feature_order, kernels, layers,
                                 optimizers, precision, row_optim, shards, sharding, startup)

    spec = importlib.util.spec_from_file_location(module_name or f"trainer_view_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names: dict = {}
    for part in (compiled, data, dense_optim, distributed, evaluation, feature_order, kernels, layers, precision,
                 row_optim, shards, sharding, startup):
        names.update({k: v for k, v in vars(part).items() if not k.startswith("__")})
    names.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    job = module.JOB
    continuous = job.passes is not None
    names.update(
        module=module, DEFAULTS=job.defaults, load_features=lambda path: data.load_features(path, job.layout), ROW_UPDATE=job.optimizer.rows,
        PASS_UPDATE=job.optimizer.hugectr if continuous else None,
        PASS_UPDATE_HYPER=job.optimizer.rows_hyper if continuous else {},
        make_optimizer=lambda model, lr, *, fused=False, capturable=False, row_updates=False:
            optimizers.make_optimizer(job.optimizer, model, lr, row_updates=row_updates, continuous=continuous),
        place_tables=lambda model, size, rank, split="auto", replicate_rows=0: sharding.place_tables(
            model, size, rank, job.optimizer.rows, split, replicate_rows))
    return types.SimpleNamespace(**names)
