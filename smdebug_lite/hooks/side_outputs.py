"""Where saved values go besides the trial: TensorBoard and SageMaker Metrics, as listeners.

The core tells `SideOutputs` what it saved (a tensor, a scalar, the end of a step) and each
listener takes what concerns it. Adapters ask only two things: whether any listener is live (a
step that only writes the trial may take the fast paths) and whether one needs a tensor's raw
value although the trial does not save it (a TensorBoard histogram).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from smdebug_lite.format.tensor_codec import LOW_PRECISION_FLOATS
from smdebug_lite.hooks.capture_plan import TensorPlan
from smdebug_lite.modes import ModeKeys


class SideOutput(Protocol):
    live: bool  # False until it has something to write to (TensorBoard opens lazily)
    may_want_raw: bool  # may want raw values the trial does not save

    def wants_raw(self, plan: TensorPlan) -> bool: ...

    def saving_step(self) -> None: ...

    def tensor_saved(self, plan: TensorPlan, raw: np.ndarray, step: int, mode: ModeKeys,
                     mode_step: int, wall_time: float) -> None: ...

    def scalar_saved(self, tag: str, value: np.ndarray, wall_time: float, step: int,
                     mode: ModeKeys, mode_step: int, sm_metric: bool) -> None: ...

    def step_ended(self) -> None: ...

    def close(self) -> None: ...


class TensorBoardOutput:
    """Scalars and histograms in a TensorBoard log directory, opened at the first saving step
    of a hook that writes."""

    def __init__(self, tensorboard_dir: str) -> None:
        self.tensorboard_dir = tensorboard_dir
        self.writer = None
        self.live = False
        self.may_want_raw = True

    def wants_raw(self, plan: TensorPlan) -> bool:
        return self.live and (plan.histogram or plan.tb_scalar)

    def saving_step(self) -> None:
        if self.writer is None:
            from smdebug_lite.writer.tensorboard import TensorBoardWriter

            self.writer = TensorBoardWriter(self.tensorboard_dir)
            self.live = True

    def tensor_saved(self, plan: TensorPlan, raw: np.ndarray, step: int, mode: ModeKeys,
                     mode_step: int, wall_time: float) -> None:
        """TensorBoard gets the step and mode of the step the tensor belongs to (a write may be
        deferred to the end of its step, after set_mode)."""
        tb = self.writer
        if tb is None:
            return
        if raw.dtype in LOW_PRECISION_FLOATS:  # bfloat16/float8 (numpy kind "V")
            raw = raw.astype(np.float32)
        if plan.tb_scalar and raw.size == 1 and raw.dtype.kind in "biuf":
            tb.add_scalar(plan.name, float(raw.reshape(-1)[0]), step, mode)
        elif plan.histogram and raw.size and raw.dtype.kind in "iuf":
            for coll_name in plan.histogram_in:
                tb.add_histogram(f"{coll_name}/{plan.name}", raw, step, mode)

    def scalar_saved(self, tag: str, value: np.ndarray, wall_time: float, step: int,
                     mode: ModeKeys, mode_step: int, sm_metric: bool) -> None:
        if self.writer is not None and step >= 0:
            self.writer.add_scalar(tag, float(np.asarray(value).reshape(-1)[0]), step, mode)

    def step_ended(self) -> None:
        if self.writer is not None:
            self.writer.flush_step()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class SageMakerMetricsOutput:
    """Losses, metrics and ``sm_metric`` scalars as SageMaker Metrics (on a training job)."""

    live = True
    may_want_raw = False  # (its plans save the raw value anyway)

    def __init__(self, metrics) -> None:
        self.metrics = metrics

    def wants_raw(self, plan: TensorPlan) -> bool:
        return False  # (its plans save the raw value anyway)

    def saving_step(self) -> None:
        pass

    def tensor_saved(self, plan: TensorPlan, raw: np.ndarray, step: int, mode: ModeKeys,
                     mode_step: int, wall_time: float) -> None:
        if plan.sm_metric and raw.size:
            # smdebug sent the mean of every losses/metrics/sm_metrics value it saved.
            self.metrics.log(f"{plan.name}_{mode.name}", raw, wall_time, mode_step)

    def scalar_saved(self, tag: str, value: np.ndarray, wall_time: float, step: int,
                     mode: ModeKeys, mode_step: int, sm_metric: bool) -> None:
        if sm_metric:
            self.metrics.log(f"{tag}_{mode.name}", value, wall_time, max(mode_step, 0))

    def step_ended(self) -> None:
        pass

    def close(self) -> None:
        self.metrics.close()


class SideOutputs:
    """The listeners of one hook. `live`: some listener writes (kept as an attribute, since
    adapters read it on every saving step)."""

    def __init__(self) -> None:
        self.listeners: list[SideOutput] = []
        self.live = False

    def add(self, listener: SideOutput) -> None:
        self.listeners.append(listener)
        self._update()

    def _update(self) -> None:
        self.live = any(listener.live for listener in self.listeners)

    @property
    def raw_wanted(self) -> bool:
        """Whether some listener may want raw values the trial does not save."""
        return any(x.live and x.may_want_raw for x in self.listeners)

    def wants_raw(self, plan: TensorPlan) -> bool:
        return any(listener.wants_raw(plan) for listener in self.listeners)

    def saving_step(self) -> None:
        """A step that saves, in a hook that writes, begins."""
        if self.listeners:
            for listener in self.listeners:
                listener.saving_step()
            self._update()

    def tensor_saved(self, plan: TensorPlan, raw: np.ndarray, step: int, mode: ModeKeys,
                     mode_step: int, wall_time: float) -> None:
        for listener in self.listeners:
            if listener.live:
                listener.tensor_saved(plan, raw, step, mode, mode_step, wall_time)

    def scalar_saved(self, tag: str, value: np.ndarray, wall_time: float, step: int,
                     mode: ModeKeys, mode_step: int, sm_metric: bool) -> None:
        for listener in self.listeners:
            if listener.live:
                listener.scalar_saved(tag, value, wall_time, step, mode, mode_step, sm_metric)

    def step_ended(self) -> None:
        for listener in self.listeners:
            if listener.live:
                listener.step_ended()

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()


__all__ = ["SageMakerMetricsOutput", "SideOutput", "SideOutputs", "TensorBoardOutput"]
