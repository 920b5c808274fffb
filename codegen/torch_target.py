"""What the PyTorch target can translate, written once: read by the model builder's rules (model/torch_rules.py, which
refuse a spec with the torch target that uses anything else) and by the renderer (render/torch_model.py, which
translates exactly these). It sits below both layers and imports nothing of ctrgen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# HugeCTR optimizer -> (torch class, keyword arguments from the effective HugeCTR values, CUDA-graph capturable).
OPTIMIZERS: dict[str, tuple[str, Callable[[Any], list[tuple[str, Any]]], bool]] = {
    "Adam": ("Adam", lambda v: [("betas", (v["beta1"], v["beta2"])), ("eps", v["epsilon"])], True),
    "SGD": ("SGD", lambda v: [], True),
    "MomentumSGD": ("SGD", lambda v: [("momentum", v["momentum_factor"])], True),
    "Nesterov": ("SGD", lambda v: [("momentum", v["momentum_factor"]), ("nesterov", True)], True),
    "AdaGrad": ("Adagrad", lambda v: [("initial_accumulator_value", v["initial_accu_value"]),
                                      ("eps", v["epsilon"])], False),
    "RMSProp": ("RMSprop", lambda v: [("alpha", v["beta"] or 0.9), ("eps", v["epsilon"])], False),
    # HugeCTR's own step (runtime/ftrl.py; its eps, FLT_EPSILON or 0, is the release's: render/torch_model.py)
    "Ftrl": ("Ftrl", lambda v: [("beta", v["beta"]), ("lambda1", v["lambda1"]), ("lambda2", v["lambda2"])], False),
}
# Continuous training: the embedding tables train with sparse gradients and an optimizer that updates only the rows
# a batch looks up (HugeCTR's embedding cache holds only a pass's keyset, so rows outside it stay as they were).
# Adam's sparse form is torch's SparseAdam (lazy Adam: moments of absent rows are neither read nor decayed); the
# trainer takes these steps itself (PassOptimizer), without torch.optim.
SPARSE_OPTIMIZERS = {"Adam": "SparseAdam", "SGD": "SGD", "AdaGrad": "Adagrad"}
# The dense layer types render/torch_model.py translates (its `_layer` has one branch for each; a test holds the two
# equal). The loss layers end the graph: one BinaryCrossEntropyLoss of one label is the trainer's own loss; several
# loss layers (one per label, MMoE), CrossEntropyLoss and MultiCrossEntropyLoss train through runtime/losses.py.
# GroupFusedInnerProduct (a GroupLayer_t) reaches the graph as the FusedInnerProduct chain HugeCTR expands it into
# (graph/layers.py).
LOSS = "BinaryCrossEntropyLoss"
LOSSES = frozenset({LOSS, "CrossEntropyLoss", "MultiCrossEntropyLoss"})
LAYER_TYPES = LOSSES | frozenset({
    "Reshape", "Concat", "Slice", "InnerProduct", "FusedInnerProduct", "ReLU", "ReLUHalf", "Sigmoid", "ELU",
    "Softmax", "Cast", "Dropout", "BatchNorm", "LayerNorm", "Add", "Sub", "ElementwiseMultiply", "MultiCross",
    "Interaction", "FmOrder2", "WeightMultiply", "ReduceSum", "ReduceMean", LOSS, "MLP", "Select",
    # DIN and BST (runtime/attention.py)
    "PReLU_Dice", "Scale", "DotProduct", "FusedReshapeConcat", "FusedReshapeConcatGeneral", "MatrixMultiply",
    "SequenceMask", "MultiHeadAttention",
})
