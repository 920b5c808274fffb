"""One import state: everything the mapping of a script's hugectr calls onto a spec reads and writes, in one object.

The handlers of :mod:`.handlers` (one per call) and the section readers of :mod:`.sections` act on it; :mod:`.to_spec`
checks the script, walks its statements through the handlers and assembles the spec from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .arguments import Refusal, kwargs_of, spec_value
from .calls import Call, Script
from .embedding_collection import Collector


@dataclass(eq=False)
class ImportState:
    script: Script
    release: str
    name: str                      # CreateSolver(model_name=...) may rename it
    source_label: str
    perf_ext: bool = False   # built as ModelPerfExt
    # Problems: calls with no spec field, collected so that the import names all of them at once.
    unmapped: list[Refusal] = field(default_factory=list)
    assumptions: list[tuple[int | None, str]] = field(default_factory=list)
    # The spec being built, and the order of the script's calls the spec's ``script:`` section keeps.
    spec: dict = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)        # solver, reader, optimizer as called
    after: list[str] = field(default_factory=list)        # summary, graph_to_json, fit after compile
    before_compile: list[str] = field(default_factory=list)
    compiled: bool = False
    # What the sections read: the key width, the reader's and the embeddings' slot sizes.
    i64: bool = False
    slot_sizes: list[int] | None = None
    embedding_sizes: list[tuple[str, list[int], int]] = field(default_factory=list)
    # The model's parts, in the order added.
    inputs: list[Call] = field(default_factory=list)
    embeddings: list[dict] = field(default_factory=list)
    layers: list[dict] = field(default_factory=list)
    ebc: Collector = field(init=False)
    # Training: the fit, the Model methods before it and after everything.
    fit: dict | None = None
    fits: list[int] = field(default_factory=list)         # the lines of a continuous-training script's fits
    then: list[dict] = field(default_factory=list)
    before_fit: list[dict] = field(default_factory=list)
    # continuous_training, when the model has an embedding cache: the cache, its host-memory cache, the passes.
    ct: dict | None = None
    hmem: dict | None = None
    passes: list[dict] = field(default_factory=list)
    pending_pass: dict | None = None
    # Data made before the solver, offline inference after training, a data-reader test.
    generator: dict | None = None
    generated: bool = False
    data_source: dict | None = None
    inference: dict | None = None
    reader_check: dict | None = None   # get_data_reader_*() and the calls per batch
    reader_getter: str = ""

    def __post_init__(self) -> None:
        self.ebc = Collector(Refusal, kwargs_of, spec_value, self.release)
