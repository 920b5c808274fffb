"""The report's summary table: one row a fact, one column a run (metrics.json as the trainer wrote it; a fact an older
run did not record is '—'), and the text of a series that held one value throughout."""

from __future__ import annotations

from typing import Any

MISSING = "—"


def _n(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _or(value: Any) -> Any:
    return MISSING if value is None else value


def schedule_text(lr: Any, s: Any) -> str:
    """CreateSolver's schedule (runtime.job.learning_rate) in words."""
    if not isinstance(s, dict) or not all(_n(s.get(k)) for k in ("warmup_steps", "decay_start", "decay_steps")):
        return MISSING
    parts = [f"warmup over {s['warmup_steps']} iterations"] if s["warmup_steps"] > 1 else []
    if s["decay_start"] > 0 and s["decay_steps"] > 0:
        parts.append(f"polynomial decay (power {s.get('decay_power')}) from iteration {s['decay_start']} over "
                     f"{s['decay_steps']} iterations to {s.get('end_lr')}")
    return ", then ".join(parts) if parts else "constant"


def _best(metrics: dict) -> str:
    best = metrics.get("best")
    if not isinstance(best, dict) or best.get("iteration") is None:
        return MISSING
    stopped = ", stopped early" if metrics.get("stopped_early") else ""
    return f"{best.get('metric')} {best.get('value')} at iteration {best.get('iteration')} (best/){stopped}"


def _label_means(data: dict) -> str:
    parts = []
    for split in ("train", "eval"):
        means = data.get(f"{split}_label_mean")
        if isinstance(means, dict):
            parts += [f"{name} {value} ({split})" for name, value in means.items()]
    return ", ".join(parts) or MISSING


def _run_rows(m: dict) -> list[tuple[str, Any]]:
    data: dict = m["data"] if isinstance(m.get("data"), dict) else {}
    per, it = data.get("steps_per_epoch"), m.get("iterations")
    epochs = ""
    if isinstance(per, int) and isinstance(it, int) and per > 0:
        epochs = f" ({it / per:.2f} epochs of {per:,} iterations)"
    rate = m.get("samples_per_second")
    return [
        ("iterations", f"{_or(it)}{epochs}"),
        ("batch", f"{_or(m.get('batch_size'))} per rank × {_or(m.get('world_size'))} rank(s) = "
                  f"{_or(m.get('global_batch_size'))}"),
        ("optimizer, learning rate", f"{_or(m.get('optimizer'))}, {m['lr']:g}" if _n(m.get("lr")) else MISSING),
        ("learning-rate schedule", schedule_text(m.get("lr"), m.get("lr_schedule"))),
        ("training / evaluation rows", f"{data['train_rows']:,} / {data['eval_rows']:,}"
         if _n(data.get("train_rows")) and _n(data.get("eval_rows")) else MISSING),
        ("label mean (CTR)", _label_means(data)),
        ("eval AUC (last)", _or(m.get("auc"))), ("best evaluation", _best(m)), ("eval loss", _or(m.get("eval_loss"))),
        ("eval normalized entropy / calibration / PR-AUC", f"{_or(m.get('normalized_entropy'))} / "
                                                           f"{_or(m.get('calibration'))} / {_or(m.get('pr_auc'))}"),
        ("train loss", _or(m.get("train_loss"))),
        ("throughput", f"{rate:,.0f} samples/s over {m.get('train_seconds')} s of training" if _n(rate) else MISSING),
        ("precision", _or(m.get("precision"))), ("device", _or(m.get("device"))),
        ("CPU threads a rank", _or(m.get("threads"))),
        ("compiled / CUDA graph", f"{_or(m.get('compiled'))} / {_or(m.get('cuda_graph'))}"),
        ("embedding update", _or(m.get("embedding_update"))), ("data on", _or(m.get("data_on"))),
        ("peak memory per rank", ", ".join(_size(b) for b in m.get("peak_memory_bytes_per_rank", [])) or MISSING),
    ]


def summary_rows(metrics: list[dict]) -> list[tuple[str, list[Any]]]:
    columns = [_run_rows(m) for m in metrics]
    return [(label, [col[k][1] for col in columns]) for k, (label, _) in enumerate(columns[0])]


def constant_text(lines: list) -> str:
    """'0.001 at every point (train/lr, 12 points)' for one run's series of a chart, '—' where it has none."""
    return "; ".join(f"{line.values[0][1]:g} at every point ({line.tag}, {len(line.values)} points)"
                     for line in lines) or MISSING
