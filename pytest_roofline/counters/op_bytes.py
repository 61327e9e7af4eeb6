"""Bytes of the tensors an aten op touches: distinct elements per storage, and write-allocate reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from pytest_roofline.counters.op_rules import _shape


# ---- bytes ----------------------------------------------------------------------------------------------
def _tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


@dataclass
class _Footprint:
    """Where a tensor's elements lie: distinct elements addressed and its byte range in its storage."""

    storage: int
    key: tuple[object, ...]  # the storage, offset, shape and strides; equal for the same elements
    nbytes: int
    start: int
    span: int  # bytes from the first to one past the last element addressed
    dense: bool  # the distinct elements fill [start, start + span) with no holes


def _footprint(t: torch.Tensor) -> _Footprint:
    size = t.element_size()
    try:
        shape, strides, offset = _shape(t), tuple(int(s) for s in t.stride()), int(t.storage_offset())
        storage = t.untyped_storage()._cdata  # StorageWeakRef's identity; all storages outlive the op
    except (RuntimeError, NotImplementedError, AttributeError):  # sparse, nested, storage-less subclasses
        numel = t.numel() * size
        return _Footprint(id(t), (id(t),), numel, 0, numel, False)
    if 0 in shape:
        return _Footprint(storage, (storage, offset, shape, strides), 0, offset * size, 0, True)
    elements, span = 1, 1
    for extent, stride in zip(shape, strides):
        if stride != 0:  # broadcast dims address one element
            elements *= extent
            span += (extent - 1) * abs(stride)
    distinct = min(elements, span)  # overlapping windows (unfold, as_strided) address at most the span
    low = offset + sum((e - 1) * s for e, s in zip(shape, strides) if s < 0)
    return _Footprint(storage, (storage, offset, shape, strides), distinct * size, low * size, span * size,
                      distinct == span)


def _unique_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct elements of ``tensors``; views of one storage count once where they overlap."""
    by_storage: dict[int, dict[tuple[object, ...], _Footprint]] = {}
    for t in tensors:
        fp = _footprint(t)
        by_storage.setdefault(fp.storage, {})[fp.key] = fp
    total = 0
    for prints in by_storage.values():
        if len(prints) == 1 or not all(fp.dense for fp in prints.values()):
            total += sum(fp.nbytes for fp in prints.values())
            continue
        end = -1
        for fp in sorted(prints.values(), key=lambda p: p.start):  # merge byte ranges
            lo, hi = max(fp.start, end), fp.start + fp.span
            if hi > lo:
                total += hi - lo
                end = hi
    return total


def _write_allocate_bytes(read: Sequence[torch.Tensor], written: Sequence[torch.Tensor]) -> int:
    """Bytes of the CPU tensors in ``written`` that the op does not also read: each such line is read into the
    cache before the store completes (write-allocate). Outputs on one storage count once, as in the bytes."""
    cpu_written = [t for t in written if t.device.type == "cpu"]
    if not cpu_written:
        return 0
    both = _unique_bytes([*read, *cpu_written])
    return max(0, both - _unique_bytes(read))


