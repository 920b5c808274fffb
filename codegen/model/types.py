"""The typed model every renderer reads: what the spec (or an imported script, through the spec it writes) means
for each target, checked, with no reference back to the spec's own classes."""

from __future__ import annotations

from dataclasses import dataclass

from ..etl.plan import EtlPlan
from ..features import Features
from ..graph.ir import TrainingJob
from ..triton.plan.repository import RepositoryPlan


@dataclass(frozen=True)
class Provenance:
    """Where the model came from, as the headers, the model card and MANIFEST.json name it."""

    spec: str                 # the spec's path relative to the project (codegen.specfile.context.display_path)
    spec_text: str
    lock: str                 # the features lock's path, the same way
    features: str             # what the features were read from (the lock's provenance, or its source kind)
    nvtabular_note: str       # "(nvtabular X saved the workflow)", or "" when the features do not say
    digest: str               # sha256 over the spec, the lock and the templates


@dataclass(frozen=True)
class ClusterLaunch:
    """cluster/: one HugeCTR process per node (mpirun, Slurm), torchrun for the PyTorch trainer."""

    nodes: int
    gpus_per_node: int
    python: str
    hosts: tuple[str, ...]                 # mpirun hosts, one per node; () leaves them to HOSTFILE
    sbatch: tuple[tuple[str, str], ...]    # (#SBATCH option, value) the spec sets
    rdzv_backend: str
    rdzv_endpoint: str


@dataclass(frozen=True)
class StudyParameter:
    name: str                 # the task.py argument it tunes
    type: str                 # double, integer, discrete or categorical
    min: float | None
    max: float | None
    values: tuple | None
    scale: str | None


@dataclass(frozen=True)
class Study:
    metric: str
    goal: str
    parameters: tuple[StudyParameter, ...]
    max_trial_count: int
    parallel_trial_count: int
    max_failed_trial_count: int | None
    algorithm: str | None


@dataclass(frozen=True)
class VertexLaunch:
    """vertex/: a Vertex AI custom job (and tuning job) running task.py on one node."""

    display_name: str
    image_uri: str
    base_image: str                        # FROM of vertex/Dockerfile, pinned
    machine_type: str
    accelerator_type: str
    command: tuple[str, ...]
    train_data: tuple[str, ...]
    valid_data: str
    schema_path: str | None
    eval_batches: int | None
    study: Study | None


@dataclass(frozen=True)
class Model:
    """One model for every target. ``targets`` are the spec's; the fields of a target that is off are None."""

    name: str
    targets: frozenset[str]
    provenance: Provenance
    features: Features                     # the features lock (or the workflow read in its place)
    job: TrainingJob                       # the HugeCTR job (graph, solver, reader, optimizer, fit)
    preset: str                            # model.preset, named in the model card
    etl: EtlPlan | None                    # the spec's etl: section
    task_eval_batches: int | None          # task.py's --eval_batches default (vertex.eval_batches)
    cluster: ClusterLaunch | None
    vertex: VertexLaunch | None
    triton: RepositoryPlan | None          # generated/<name>/triton/
    triton_torch: RepositoryPlan | None    # generated/<name>/triton_torch/

    @property
    def compiled(self) -> bool:
        """False for an embedding collection or a reader check: model.py is all that is rendered for HugeCTR (what
        graph_to_json and summary() print for a collection is not established; a reader check never compiles)."""
        return self.job.graph.collection is None and self.job.reader_check is None
