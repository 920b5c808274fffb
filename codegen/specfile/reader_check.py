"""``reader_check:``: a data-reader test instead of training (HugeCTR's own data-reader tests do this).

model.py builds the solver, reader, optimizer and the Input layer, takes the training (or evaluation) data reader
of the model and, for each of ``batches`` batches, makes the calls of ``each_batch`` in order: methods of the reader
(``read_a_batch_to_device``) or of the model (``check_out_tensor``). There is no loss, compile or fit.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .fields import ExtraArgs, Ident, PosInt, Strict


class ReaderCheckCall(Strict):
    """One call per batch, e.g. {of: reader, method: read_a_batch_to_device} or
    {of: model, method: check_out_tensor, args: {tensor_name: dense, tensor_type: Tensor_t.Train}}."""

    of: Literal["reader", "model"] = Field(..., description="the data reader or the model")
    method: Ident
    args: ExtraArgs = Field(default_factory=dict)


class ReaderCheckSpec(Strict):
    reader: Literal["train", "eval"] = Field("train", description="model.get_data_reader_train() or _eval()")
    batches: PosInt = Field(..., description="how many batches model.py reads")
    each_batch: list[ReaderCheckCall] = Field(..., min_length=1, description="the calls made for each batch, in "
                                                                          "order")
