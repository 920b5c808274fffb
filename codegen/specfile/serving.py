"""The spec's ``triton:`` section: the Triton repositories (HugeCTR and PyTorch model steps, preprocessing,
instances, batching)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, PlainValidator, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from ..inputs import INT32_MAX
from .fields import Float32, Ident, NonNegInt, PosInt, Strict

InstanceKind = Literal["KIND_GPU", "KIND_CPU", "KIND_AUTO"]


def _instance_count(value: Any) -> int | str:
    """'auto' or a positive C++ int; the messages read like the other integer fields' (specfile/load.py)."""
    if value == "auto":
        return value
    if type(value) is not int:
        kinds = ((bool, "a boolean"), (str, "a string"), (float, "a float"), (list, "a list"), (dict, "a mapping"))
        name = next((n for t, n in kinds if isinstance(value, t)), type(value).__name__)
        shown = name if isinstance(value, (list, dict)) else f"{name} {value!r}"
        raise PydanticCustomError("instance_count", "must be 'auto' or an integer, not {got}", {"got": shown})
    if value < 1:
        raise PydanticCustomError("instance_count", "must be 'auto' or greater than 0, got {got}", {"got": value})
    if value > INT32_MAX:
        raise PydanticCustomError("instance_count", "must be 'auto' or less than or equal to {limit} (2**31-1, the "
                                  "C++ int it becomes), got {got}", {"limit": INT32_MAX, "got": value})
    return value


# One error line for both forms (a plain union would report one line per branch).
InstanceCount = Annotated[Union[int, Literal["auto"]], PlainValidator(_instance_count),
                          WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1, "maximum": INT32_MAX},
                                                    {"const": "auto"}]})]


class InstanceSpec(Strict):
    """One Triton ``instance_group`` (NVTabular's exporter hard-coded these, triton.md §6.5, R11)."""

    kind: InstanceKind = "KIND_CPU"
    count: InstanceCount = Field(
        "auto", description="instances (per GPU on a GPU); auto: chosen for the machine by ctrgen assemble (--cores)")
    gpus: list[NonNegInt] | None = Field(None, description="GPU ids (KIND_GPU only; default: every GPU)")

    @model_validator(mode="after")
    def _gpus_need_gpu_kind(self) -> "InstanceSpec":
        if self.gpus is not None and self.kind != "KIND_GPU":
            raise ValueError("gpus is only valid with kind: KIND_GPU")
        return self


class DynamicBatchingSpec(Strict):
    """Triton's dynamic batcher for a python-backend model: requests that queue while an instance is busy reach it
    together in one ``execute`` (one transform or one forward for all of them)."""

    enabled: bool = True
    max_queue_delay_microseconds: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        0, description="how long a request may wait for others to join it (0: only those already queued)")


class PreprocessingSpec(Strict):
    """The ``<name>_nvt`` python-backend model that runs the saved NVTabular workflow (compiled to numpy lookups)."""

    instance: InstanceSpec = Field(default_factory=lambda: InstanceSpec(),
                                   description="instance_group (default: CPU instances, as many as ctrgen assemble "
                                               "chooses for the machine: one per core, at most 8)")
    dynamic_batching: DynamicBatchingSpec = Field(default_factory=DynamicBatchingSpec)


class HugeCTRServingSpec(Strict):
    """The ``<name>`` HugeCTR-backend model and its ``ps.json`` entry (triton.md §2, §4)."""

    gpus: list[NonNegInt] = Field(default_factory=lambda: [0], min_length=1,
                                  description="instance_group gpus and ps.json deployed_device_list")
    count: PosInt = Field(1, description="model instances (<= num_of_worker_buffer_in_pool)")
    gpucache: bool = True
    gpucacheper: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False, strict=True)] = 0.5
    hit_rate_threshold: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)] = 0.9
    num_of_worker_buffer_in_pool: PosInt | None = Field(None, description="default: count")
    num_of_refresher_buffer_in_pool: PosInt = 1
    cache_refresh_percentage_per_iteration: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False,
                                                                   strict=True)] = 0.2
    default_value_for_each_table: Float32 = 0.0
    output_name: Ident = "OUTPUT0"
    snapshot_iteration: PosInt | None = Field(
        None, description="iteration in the weight file names (default: fit's last snapshot, else max_iter)")
    snapshot_prefix: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]*$",
                                        description="weight file prefix (default: training.snapshot_prefix)")

    @model_validator(mode="after")
    def _enough_buffers(self) -> "HugeCTRServingSpec":
        if self.num_of_worker_buffer_in_pool is not None and self.num_of_worker_buffer_in_pool < self.count:
            raise ValueError("num_of_worker_buffer_in_pool must be >= count (the backend refuses more instances "
                             "than worker buffers)")
        return self


class TorchServingSpec(Strict):
    """The ``<name>`` python-backend model of ``generated/<name>/triton_torch/`` (rendered when ``torch`` is among
    ``targets``): it loads train_torch.py's ``Model`` with the trained ``model.pt`` + ``features.json``."""

    instance: InstanceSpec = Field(default_factory=lambda: InstanceSpec(kind="KIND_AUTO"),
                                   description="instance_group (default KIND_AUTO: a GPU when the server has one; "
                                               "count auto: ctrgen assemble chooses one per GPU, else one per "
                                               "2 x `threads` cores)")
    threads: Annotated[int, Field(ge=1, le=256)] = Field(
        1, description="torch.set_num_threads of each instance on the CPU (instances x threads <= cores)")
    dynamic_batching: DynamicBatchingSpec = Field(default_factory=DynamicBatchingSpec)
    output_name: Ident = Field("OUTPUT0", description="the prediction tensor (sigmoid of the logits), as the HugeCTR "
                                                      "model names it")


class TritonSpec(Strict):
    """The Triton model repository written to generated/<name>/triton/ (on by default)."""

    enabled: bool = True
    max_batch_size: PosInt = Field(64, description="samples per request, equal in every config.pbtxt and ps.json")
    model_root: str = Field("/model", pattern=r"^/[A-Za-z0-9_./-]*$",
                            description="where the repository is mounted in the serving container")
    version: PosInt = 1
    preprocessing: PreprocessingSpec = Field(default_factory=PreprocessingSpec)
    hugectr: HugeCTRServingSpec = Field(default_factory=HugeCTRServingSpec)
    torch: TorchServingSpec = Field(default_factory=TorchServingSpec,
                                    description="the PyTorch repository generated/<name>/triton_torch/ (targets: torch)")
