"""spec (+ features) -> :class:`Model`: every rule that ties the spec's sections together runs here, each reported
against its spec line, before any file is rendered."""

from __future__ import annotations

import hashlib
import re

from ..errors import Located, UserError, field_path
from ..features import Features
from ..graph.build import build_job as build_graph_job
from ..graph.ir import TrainingJob
from ..lock import load_features, select_columns
from ..specfile.context import SpecContext
from ..template_files import templates_digest
from ..triton.plan.repository import ModelStep, RepositoryPlan, TorchStep, plan_repository
from .home_paths import check_home_paths
from .launch import cluster_launch, vertex_launch
from .spec_rules import check_spec_rules, report
from .torch_rules import torch_problems
from .types import Model, Provenance


def inputs_digest(spec_text: str, lock_text: str) -> str:
    h = hashlib.sha256()
    for part in (spec_text, lock_text, templates_digest()):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def build_job(ctx: SpecContext, features: Features) -> TrainingJob:
    """The HugeCTR job alone (what ``ctrgen summary``, ``graph``, ``port`` and ``keysets`` need)."""
    check_home_paths(ctx.loaded)
    check_spec_rules(ctx.loaded, features)
    return build_graph_job(ctx.loaded, features, ctx.lock_display)


def spec_features(ctx: SpecContext) -> Features:
    """The lock restricted to the columns the spec trains on, in the spec's order. The spec is built first, so
    unknown columns fail with generation's own messages."""
    features, _ = load_features(ctx, check_stale=False)
    build_job(ctx, features)
    return select_columns(features, ctx.spec)


def build_model(ctx: SpecContext, features: Features, lock_text: str) -> Model:
    """The model of the spec of ``ctx`` with ``features`` (``lock_text``: the text they were read from, hashed into
    the provenance)."""
    spec, loaded = ctx.spec, ctx.loaded
    job = build_job(ctx, features)
    etl = None
    if spec.etl is not None:
        from ..etl.plan import build_plan

        etl = build_plan(loaded)
    targets = frozenset(spec.targets)
    if job.graph.collection is not None or job.reader_check is not None:
        what_only = "an embedding_collection renders model.py only (its graph JSON is not established)" \
            if job.graph.collection is not None else "reader_check renders model.py only (it is never compiled)"
        # train_torch.py translates a collection (model/torch_collection.py); a reader check trains nothing
        allowed = {"hugectr", "torch"} if job.graph.collection is not None else {"hugectr"}
        for field, on in (("triton", spec.triton.enabled), ("targets", bool(targets - allowed))):
            if on:
                targets_fix = f"targets: [{', '.join(sorted(allowed))}]"
                raise loaded.error((field,), f"a model with {what_only}", fix="triton: {enabled: false}; "
                                   f"{targets_fix}" if field == "triton" else targets_fix)
    if "torch" in targets:
        report(loaded, torch_problems(job))      # what train_torch.py cannot translate, every problem at once
    vertex = vertex_launch(loaded, job) if "vertex" in targets else None
    cluster = cluster_launch(loaded) if "cluster" in targets else None
    triton = triton_torch = None
    if spec.triton.enabled:
        triton = _plan_triton(ctx, job, features)
        if "torch" in targets:
            triton_torch = _plan_triton(ctx, job, features, TorchStep())
    elif "torch" in spec.triton.model_fields_set:
        raise loaded.error(("triton", "torch"), "triton.torch configures the PyTorch Triton repository, but the "
                           "Triton target is off", fix="remove triton.torch, or 'enabled: false'")
    if "torch" in spec.triton.model_fields_set and "torch" not in targets:
        raise loaded.error(("triton", "torch"), "triton.torch configures generated/<name>/triton_torch/, which "
                           "is rendered only for the torch target", fix="add torch to targets, or remove "
                           "triton.torch")
    provenance = Provenance(spec=ctx.display, spec_text=loaded.text, lock=ctx.lock_display,
                            features=features.provenance or features.source_kind,
                            nvtabular_note=_nvtabular_note(features), digest=inputs_digest(loaded.text, lock_text))
    return Model(name=job.name, targets=targets, provenance=provenance, features=features, job=job,
                 preset=spec.model.preset, etl=etl, task_eval_batches=spec.vertex.eval_batches if spec.vertex else None,
                 cluster=cluster, vertex=vertex, triton=triton, triton_torch=triton_torch)


def _plan_triton(ctx: SpecContext, job: TrainingJob, features: Features,
                 step: ModelStep | None = None) -> RepositoryPlan:
    try:
        return plan_repository(job, features, ctx.spec.triton, step)
    except Located as exc:
        if exc.source == "spec":
            raise ctx.loaded.error(exc.loc, exc.message, exc.fix) from None
        raise UserError.one(ctx.lock_display, exc.message, field=field_path(exc.loc), fix=exc.fix) from None


def _nvtabular_note(features: Features) -> str:
    m = re.search(r"nvtabular [0-9][0-9A-Za-z.]*", features.provenance)
    return f"({m.group(0)} saved the workflow)" if m else ""
