"""One rank of N in a single process, for timing the compute of an N-rank step on one GPU.

A machine with one GPU cannot run N ranks, but the compute of one rank of N (its lookups at batch B / N, its share
of the dense layers, the sorts and row kernels of exchanged and replicated rows, the assembly and the scaling of
the exchanged gradients) is the same work whoever the peers are. `install(N)` makes the trainer of this process rank
0 of N (`init(N)`: at once) with the "mirror" process group: every peer is taken to be a copy of this rank, so no collective moves data between GPUs
and none puts an NCCL kernel on the GPU.

- all_to_all_single: the block every peer would send here is what this rank sends itself, where the sizes agree
  (ids: a lookup of the same valid ids); where they differ (rows of a rank that owns other slots) the block is
  filled from this rank's input, values of the right type. One device copy a block.
- all_gather: this rank's tensor, N times. all_reduce, broadcast, barrier, send, recv: nothing (the values stay
  as they are: an all_reduce of N equal values would scale them by N, which no step's timing depends on).

What it measures is the compute stream alone, plus the copies of the exchanges' blocks, which NCCL would make on
its own stream (bench/profile_step.py's kernel list shows them as device-to-device copies). It says nothing about transfers or their overlap.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

NAME = "mirror"


def _done(result=None):
    future: Future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


class MirrorGroup(dist.ProcessGroup):
    """A process group whose every collective completes at once, this rank standing in for each peer."""

    def __init__(self, rank: int, size: int):
        super().__init__(rank, size)
        self._rank, self._size = rank, size

    def getBackendName(self) -> str:
        return NAME

    # -- what moves data between ranks: modelled as copies of this rank ---------------------------------------------
    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_splits: list, input_splits: list,
                      opts=None):
        size = self._size
        out_splits = list(output_splits) or [output.shape[0] // size] * size
        in_splits = list(input_splits) or [input.shape[0] // size] * size
        start = sum(in_splits[:self._rank])
        own = input[start:start + in_splits[self._rank]]
        at = 0
        for n in out_splits:
            block = output[at:at + n]
            if n == own.shape[0]:
                block.copy_(own)
            elif n and input.shape[0]:
                flat = input.reshape(-1)
                need = block.numel()
                block.view(-1).copy_(flat.repeat(-(-need // flat.numel()))[:need])
            at += n
        return _done([output])

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts=None):
        output.view(self._size, *input.shape).copy_(input.unsqueeze(0).expand(self._size, *input.shape))
        return _done([output])

    all_gather_single = _allgather_base      # (its name from torch 2.12 on)

    def allgather(self, output_lists: list, inputs: list, opts=None):
        for outputs, tensor in zip(output_lists, inputs):
            for out in outputs:
                out.copy_(tensor)
        return _done(output_lists)

    # -- what only combines equal values: nothing to do --------------------------------------------------------------
    def allreduce(self, tensors: list, opts=None):
        return _done(tensors)

    def broadcast(self, tensors: list, opts=None):
        return _done(tensors)

    def barrier(self, opts=None):
        return _done()

    def send(self, tensors: list, dst: int, tag: int):
        return _done()

    def recv(self, tensors: list, src: int, tag: int):
        return _done(tensors)


def _create(store, rank: int, size: int, timeout: timedelta) -> MirrorGroup:
    return MirrorGroup(rank, size)


def init(size: int) -> None:
    """This process becomes rank 0 of `size` now (every later new_group() is a mirror group too)."""
    install(size)
    dist.init_process_group()


def install(size: int) -> None:
    """Make the trainer of this process rank 0 of `size` mirror ranks: the environment torchrun would set for rank
    0 on a node of one GPU, and its init_process_group (whatever backend it names) opening the mirror group."""
    os.environ.update(WORLD_SIZE=str(size), RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    if getattr(dist.init_process_group, "mirror", False):
        return
    original = dist.init_process_group

    def init_process_group(*args, **kwargs) -> None:
        if NAME not in dist.Backend.backend_list:
            dist.Backend.register_backend(NAME, _create, devices=["cpu", "cuda"])
        original(backend=NAME, store=dist.HashStore(), rank=0, world_size=int(os.environ["WORLD_SIZE"]))

    init_process_group.mirror = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group
