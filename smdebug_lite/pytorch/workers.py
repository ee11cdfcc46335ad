"""Which worker this process is, for file names and the collections file's worker count.

Checked in smdebug's order: torch.distributed, then Horovod, then SageMaker's data-parallel
library. Asked again when the first step starts, because a hook is often built before
``init_process_group`` runs (always so with the zero-code-change launcher).
"""

from __future__ import annotations

import importlib.util
import json
import os

import torch.distributed as dist

DEFAULT_WORKER = "worker_0"


def _from_torch_distributed() -> tuple[int, int] | None:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def _from_horovod() -> tuple[int, int] | None:
    if importlib.util.find_spec("horovod") is None:
        return None
    try:
        import horovod.torch as hvd  # type: ignore[import-not-found]

        if hvd.size():
            return hvd.rank(), hvd.size()
    except (ImportError, ValueError):
        pass
    return None


def _smddp_enabled() -> bool:
    """smdebug's test: the framework params flag it and the MPI world has at least 8 ranks."""
    try:
        params = json.loads(os.environ.get("SM_FRAMEWORK_PARAMS") or "{}")
        size = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or "0")
    except (ValueError, TypeError):
        return False
    return bool(params.get("sagemaker_distributed_dataparallel_enabled")) and size >= 8


def _from_smddp() -> tuple[int, int] | None:
    if not _smddp_enabled():
        return None
    try:
        import smdistributed.dataparallel.torch.distributed as smddp  # type: ignore[import-not-found]

        if smddp.get_world_size():
            return smddp.get_rank(), smddp.get_world_size()
    except (ImportError, ValueError):
        pass
    return None


def rank_and_world_size() -> tuple[int, int]:
    for probe in (_from_torch_distributed, _from_horovod, _from_smddp):
        found = probe()
        if found is not None:
            return found
    return 0, 1


def worker_name() -> str:
    return f"worker_{rank_and_world_size()[0]}"


def num_workers() -> int:
    return rank_and_world_size()[1]


__all__ = ["DEFAULT_WORKER", "num_workers", "rank_and_world_size", "worker_name"]
