"""The spec's launch targets: ``targets:``, ``vertex:`` (Vertex AI) and ``cluster:`` (mpirun, Slurm, torchrun)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from .fields import Float, Ident, NonNegInt, PosInt, Strict

TARGETS = ("hugectr", "task", "vertex", "cluster", "torch")
# #SBATCH lines are read by sbatch, not by a shell: their values must be plain tokens (no spaces, quotes, newlines).
SlurmToken = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@%+=,/-]+$", max_length=128)]


class StudyParameter(Strict):
    """One tuned task.py argument (a Vertex AI StudySpec.ParameterSpec)."""

    name: Ident = Field(..., description="the task.py argument it sets, e.g. lr or dropout_rate")
    type: Literal["double", "integer", "discrete", "categorical"]
    min: Float | None = Field(None, description="double / integer: lower bound")
    max: Float | None = Field(None, description="double / integer: upper bound")
    values: list[Float] | list[str] | None = Field(None, description="discrete (numbers) / categorical (strings)")
    scale: Literal["linear", "log", "reverse_log"] | None = Field(None, description="double / integer / discrete")


class StudySpec(Strict):
    metric: Literal["AUC"] = Field("AUC", description="the metric task.py reports to hypertune")
    goal: Literal["maximize", "minimize"] = "maximize"
    parameters: list[StudyParameter] = Field(..., min_length=1)
    max_trial_count: PosInt = 4
    parallel_trial_count: PosInt = 2
    max_failed_trial_count: NonNegInt | None = None
    algorithm: Literal["grid", "random"] | None = Field(None, description="omitted: Vertex AI's default (Bayesian)")


# An image reference pinned by a tag or a sha256 digest: registry/path:tag or ...@sha256:hex (":latest" is refused by
# VertexSpec's validator: the pattern engine has no look-ahead).
PINNED_IMAGE = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+"
                r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$")


class VertexSpec(Strict):
    """Vertex AI custom training (seed 004): one node, the GPUs of solver.vvgpu, task.py in a container."""

    display_name: Annotated[str, Field(min_length=1, max_length=128)] | None = Field(
        None, description="job display name (default: hugectr-<name>)")
    image_uri: Annotated[str, Field(min_length=1)] = Field(
        ..., description="training container; {project} and {region} are filled in by submit.py")
    machine_type: Annotated[str, Field(pattern=r"^[a-z0-9-]+$")] = "a2-highgpu-1g"
    accelerator_type: Annotated[str, Field(pattern=r"^[A-Z0-9_]+$")] = "NVIDIA_TESLA_A100"
    command: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=lambda: ["python", "-m", "task"])
    base_image: Annotated[str, Field(pattern=PINNED_IMAGE, max_length=255)] = Field(
        "nvcr.io/nvidia/merlin/merlin-training:22.04",
        description="FROM of vertex/Dockerfile: a Merlin image with the HugeCTR release the spec targets, pinned by "
                    "tag or digest (not :latest); default: seed 004's image")

    @field_validator("base_image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if value.endswith(":latest"):
            raise ValueError("':latest' moves: pin the image by a release tag or a sha256 digest")
        return value
    train_data: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, min_length=1, description="--train_data as the container sees it, e.g. /gcs/{bucket}/train/_file_list.txt "
                                        "(default: data.train); {bucket} is filled in by submit.py")
    valid_data: Annotated[str, Field(min_length=1)] | None = Field(None, description="--valid_data (default: data.eval)")
    schema_path: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="--schema: the transformed dataset's schema.pbtxt as the container sees it")
    eval_batches: PosInt | None = Field(None, description="--eval_batches: batches of the final evaluation")
    study: StudySpec | None = Field(None, description="hyperparameter tuning job (omitted: custom job only)")


class SlurmSpec(Strict):
    partition: SlurmToken | None = None
    account: SlurmToken | None = None
    time: SlurmToken | None = Field(None, description="e.g. 04:00:00")


class ClusterSpec(Strict):
    """Multi-node launchers: one process per node for HugeCTR (mpirun, srun), torchrun for the PyTorch trainer."""

    hosts: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="mpirun hosts, one per node (default: the HOSTFILE environment variable)")
    gpus_per_node: PosInt | None = Field(None, description="default: the length of each solver.vvgpu row")
    python: Annotated[str, Field(min_length=1)] = "python3"
    rdzv_endpoint: Annotated[str, Field(min_length=1)] = Field(
        "localhost:29500", description="torchrun --rdzv-endpoint (host:port of node 0)")
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2", "static"] = "c10d"
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
