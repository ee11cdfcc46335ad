"""Which of smdebug's PyTorch hook methods a subclass of our Hook may override.

Scripts written for smdebug subclass its Hook and override the methods its machinery calls per
module and per step (a pruning example overrides ``forward_hook`` and writes tensors of its own
with ``_write_outputs``). Our hook calls those methods too, but only when a subclass overrides
them, so that a plain Hook keeps its fast path; that is decided once, at construction.

smdebug's deeper internals (how a tensor is written, which collections save a step, its writers,
its profiler) have no counterpart here: the hook never calls them, so an override of one would
be silently ignored. Such a subclass is refused at construction instead, naming the method.
"""

from __future__ import annotations

from smdebug_lite.exceptions import SMDebugTypeError

# Called by the hook when a subclass overrides them (see docs/pytorch.md, "Extending the hook").
HONOURED = frozenset({
    "forward_pre_hook",  # the registered model's forward pre-hook: one per step
    "forward_hook",  # every module of a registered model, and every registered loss
    "backward_hook",  # factory of the gradient callback of each parameter (Tensor.register_hook)
    "fhook",  # the registered model's own forward hook
    "_write_inputs",  # called by the default forward_hook
    "_write_outputs",  # called by the default forward_hook and by record_tensor_value
    "_get_worker_name",
    "_get_num_workers",
    "count_parameters",  # called by register_module
})

# smdebug 1.0.34 methods that its hook calls itself and ours never does.
NOT_CALLED = frozenset({
    "_backward_apply", "_check_collections_prep", "_cleanup", "_close_given_writer_map",
    "_close_tb_writer", "_close_writers", "_closure_for_registering_forward_hook",
    "_collect_torch_profiling_data_if_profiler_enabled", "_get_all_collections_to_save",
    "_get_collections_to_save_for_step", "_get_collections_with_tensor", "_get_default_collections",
    "_get_main_writer", "_get_reduction_of_data", "_get_reduction_tensor_name", "_get_writers",
    "_has_default_profiler_configuration", "_increment_step", "_initialize_to_last_saved_state",
    "_initialize_writers", "_is_collection_being_saved_for_step", "_is_not_supported",
    "_is_tensor_saved_for_step", "_log_params", "_log_save", "_make_numpy_array",
    "_maybe_get_tb_writer", "_save_custom_tensors_post_step", "_save_for_tensor",
    "_should_collection_be_saved", "_write", "_write_for_tensor", "_write_histogram_summary",
    "_write_raw_tensor", "_write_raw_tensor_simple", "_write_reduction", "_write_reductions",
    "_write_scalar_summary", "_write_scalars", "_write_shape", "_write_state", "export_collections",
    "log_outstanding_backward_stats_and_reset", "log_outstanding_forward_stats_and_reset",
    "log_outstanding_timeline_metrics", "log_trace_event", "record_trace_events",
    "reset_backward_module_profile_stats", "reset_forward_module_profile_stats",
})

_checked: dict[tuple[type, type], frozenset[str]] = {}


def _overrides(cls: type, base: type, name: str) -> bool:
    """Whether `cls` (a subclass of `base`) defines `name` itself, or below `base`."""
    if not hasattr(cls, name):
        return False
    if not hasattr(base, name):
        return True
    return any(name in vars(k) for k in cls.__mro__ if k is not base and issubclass(k, base))


def overridden(cls: type, base: type) -> frozenset[str]:
    """The honoured methods `cls` overrides; raises SMDebugTypeError for any override the hook
    would never call."""
    key = (cls, base)
    found = _checked.get(key)
    if found is not None:
        return found
    if cls is base:
        found = frozenset()
    else:
        ignored = sorted(n for n in NOT_CALLED if _overrides(cls, base, n))
        if ignored:
            raise SMDebugTypeError(
                f"{cls.__module__}.{cls.__qualname__} overrides {', '.join(ignored)} of the "
                "PyTorch Hook, which smdebug-lite's hook never calls (it saves tensors by its "
                "own path), so the override would be ignored. Override one of "
                f"{', '.join(sorted(HONOURED))} instead (docs/pytorch.md, 'Extending the "
                "hook'); _save_for_tensor and _write_raw_tensor_simple can still be called")
        found = frozenset(n for n in HONOURED if _overrides(cls, base, n))
    _checked[key] = found
    return found


__all__ = ["HONOURED", "NOT_CALLED", "overridden"]
