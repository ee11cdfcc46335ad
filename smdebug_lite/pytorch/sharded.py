"""Tensors sharded across ranks (DTensor, as FSDP2's ``fully_shard`` makes its parameters and
gradients): what the hook saves of them is what the unsharded tensor would give.

Each rank holds only its shard, so a reduction of the local tensor alone would be wrong.
Reductions are computed from per-shard partial results (element count, sums, sums of squared
deviations, minimum and maximum) combined with ``all_reduce`` over the mesh dimensions the
tensor is sharded on; a raw value is gathered (``full_tensor()``) only when it is to be saved.
Both are collectives: every rank of the mesh must make the same calls in the same order, which
the hook does by capturing on every rank of a sharded model, writing or not.

Partial results are combined in float64 and the value is cast to the dtype `reduce_tensor`
gives the unsharded tensor, so values agree with an unsharded run up to float rounding.
Variance and std take a second pass around the global mean (no cancellation from a sum of
squares). Tensors whose reductions cannot be combined that way (integer, complex, or placed
``Partial``) are gathered and reduced whole.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from smdebug_lite.config.reductions import is_count
from smdebug_lite.pytorch.reductions import reduce_tensor

_DTENSOR_MODULE = "torch.distributed.tensor"
_SECOND_PASS = frozenset({"variance", "std"})


def is_dtensor(t: object) -> bool:
    """Whether `t` is a DTensor. No DTensor exists before its module is imported, so the check
    imports nothing (the hook asks it of tensors that are not plain)."""
    mod = sys.modules.get(_DTENSOR_MODULE)
    return mod is not None and isinstance(t, mod.DTensor)


def unwrapped_class_name(module: nn.Module) -> str | None:
    """The class name the user wrote, for a module whose class ``fully_shard`` swapped for a
    generated ``FSDP<Class>`` (or composable ``replicate`` for ``DDP<Class>``); None for any
    other module. Tensor names keep the original class, so a sharded run names its tensors as
    an unsharded one."""
    cls = type(module)
    for wrapper in _wrapper_classes():
        if issubclass(cls, wrapper):
            for base in cls.__mro__[1:]:
                if not issubclass(base, wrapper) and issubclass(base, nn.Module):
                    return base.__name__
    return None


@functools.cache
def _wrapper_classes() -> tuple[type, ...]:
    found: list[type] = []
    try:
        from torch.distributed.fsdp import FSDPModule

        found.append(FSDPModule)
    except ImportError:
        pass
    try:
        from torch.distributed._composable.replicate import DDP

        found.append(DDP)
    except ImportError:
        pass
    return tuple(found)


def full_value(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor as a plain local tensor (an all-gather over the mesh)."""
    with torch.no_grad():
        return t.full_tensor().detach()


@functools.cache
def _result_dtype(dtype: torch.dtype, reduction: str, is_abs: bool) -> torch.dtype:
    """The dtype `reduce_tensor` gives an unsharded tensor of `dtype`."""
    return reduce_tensor(torch.zeros(2, dtype=dtype), reduction, is_abs).dtype


def full_reductions(t: torch.Tensor, reductions: Sequence[tuple[str, bool]],
                    tensor_name: str | None = None) -> list[torch.Tensor]:
    """Each (reduction, abs) of the whole DTensor `t`, as 0-d tensors on its local device, equal
    on every rank. Every rank of `t`'s mesh must call this with the same reductions."""
    placements = t.placements
    if (not t.is_floating_point()
            or not all(p.is_shard() or p.is_replicate() for p in placements)):
        whole = full_value(t)
        return [reduce_tensor(whole, red, is_abs, tensor_name) for red, is_abs in reductions]
    mesh = t.device_mesh
    groups = [mesh.get_group(d) for d, p in enumerate(placements) if p.is_shard()]
    local = t.to_local().detach()
    combined = _combine(local, {is_abs for _, is_abs in reductions}, groups,
                        any(red in _SECOND_PASS for red, _ in reductions),
                        any(red == "prod" for red, _ in reductions))
    out = []
    for red, is_abs in reductions:
        value = combined[(red, is_abs and not is_count(red))]
        out.append(value.to(_result_dtype(t.dtype, red, is_abs)))
    return out


def _all_reduce(x: torch.Tensor, op: dist.ReduceOp, groups: list) -> torch.Tensor:
    for group in groups:
        dist.all_reduce(x, op=op, group=group)
    return x


def _combine(local: torch.Tensor, abs_variants: set[bool], groups: list, second_pass: bool,
             with_prod: bool) -> dict[tuple[str, bool], torch.Tensor]:
    """Every reduction of the whole tensor, keyed (reduction, abs), from this rank's shard."""
    x = local.to(torch.float64).reshape(-1)
    dev = x.device
    variants = sorted(abs_variants)  # False (plain) first, then True (abs)
    views = {a: (x.abs() if a else x) for a in variants}
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=dev)
    # One SUM vector: the element count, the three counts, sum |x| (l1), sum x^2 (l2 squared),
    # then the sum of each variant; one MIN vector: min and -max of each variant (an empty shard
    # contributes +inf).
    sums = [torch.tensor(float(x.numel()), dtype=torch.float64, device=dev),
            torch.isnan(x).sum(dtype=torch.float64), torch.isinf(x).sum(dtype=torch.float64),
            (x == 0).sum(dtype=torch.float64), x.abs().sum(), x.square().sum()]
    mins = []
    for a in variants:
        v = views[a]
        sums.append(v.sum())
        mins += [v.min() if v.numel() else inf, -v.max() if v.numel() else inf]
    s = _all_reduce(torch.stack(sums), dist.ReduceOp.SUM, groups)
    m = _all_reduce(torch.stack(mins), dist.ReduceOp.MIN, groups)
    n = s[0]
    out: dict[tuple[str, bool], torch.Tensor] = {
        ("num_nan", False): s[1].to(torch.int64),
        ("num_inf", False): s[2].to(torch.int64),
        ("num_zero", False): s[3].to(torch.int64),
    }
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=dev)
    has_nan = s[1] > 0  # (torch's min/max give NaN then; a MIN over ranks need not)
    means = {}
    for i, a in enumerate(variants):
        total = s[6 + i]
        means[a] = total / n
        out[("sum", a)] = total
        out[("mean", a)] = means[a]
        out[("min", a)] = torch.where(has_nan, nan, m[2 * i])
        out[("max", a)] = torch.where(has_nan, nan, -m[2 * i + 1])
        out[("l1", a)] = s[4]
        out[("l2", a)] = s[5].sqrt()
    if second_pass:
        dev_sq = torch.stack([(views[a] - means[a]).square().sum() for a in variants])
        dev_sq = _all_reduce(dev_sq, dist.ReduceOp.SUM, groups)
        for i, a in enumerate(variants):
            var = dev_sq[i] / (n - 1) if n >= 2 else nan  # (as `reduce_tensor`)
            out[("variance", a)] = var
            out[("std", a)] = var.sqrt()
    if with_prod:
        prods = _all_reduce(torch.stack([views[a].prod() for a in variants]),
                            dist.ReduceOp.PRODUCT, groups)
        for i, a in enumerate(variants):
            out[("prod", a)] = prods[i]
    return out


__all__ = ["full_reductions", "full_value", "is_dtensor", "unwrapped_class_name"]
