"""Layer types HugeCTR builds into no model it can run, refused for every target (the HugeCTR script, its graph JSON
and the PyTorch trainer) with the reason read in HugeCTR's source (docs/torch.md cites the lines)."""

from __future__ import annotations

from ..hugectr import versions as V

UNRUNNABLE = {
    "GRU": "HugeCTR's GRULayer trains no defined function: its bprop (src/layers/gru_layer.cu, lines 293-356 at "
           "v25.03.00, 340-408 at v3.2) reads the output's gradient from a gradient buffer no layer writes "
           "(get_wgrad(1)), writes the input's gradient to another (get_wgrad(0)) so no layer below gets one, and "
           "ends by freeing the cuDNN workspaces and destroying the RNN descriptors the next fprop uses",
    "Gather": "HugeCTR builds no working Gather: up to 23.06 the model builder hands GatherLayer an output tensor it "
              "never allocates (src/layers/gather_layer.cu reserves only the indices), so fprop writes through an "
              "empty tensor; from 23.08 Gather is a SelectLayer of dimension 0, which throws \"Dim 0 is not allowed "
              "to do select because it's batch dim.\"",
}


def refusal(layer: str, release: str) -> str | None:
    """Why a layer of type ``layer`` cannot be in a model of ``release`` (HugeCTR's own text where it has one)."""
    if layer == "Gather" and V.holds("gather_is_select", release):
        return ('HugeCTR rejects this: "Dim 0 is not allowed to do select because it\'s batch dim." (from 23.08 '
                "Layer_t.Gather is built as a Select of dimension 0)")
    if layer in UNRUNNABLE:
        return f"ctrgen refuses this: {UNRUNNABLE[layer]}"
    return None
