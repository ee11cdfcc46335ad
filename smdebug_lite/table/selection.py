"""What to export from a trial: which tensors, modes and steps, and in what windows."""

from __future__ import annotations

from dataclasses import dataclass

from smdebug_lite.config.arguments import parse_mode
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.modes import ModeKeys

DEFAULT_WINDOW_STEPS = 500


@dataclass(frozen=True)
class Selection:
    """Tensors by name, regex or collection (any given must hold); steps are global steps,
    `end_step` exclusive; `window_steps` steps are read and written at a time."""

    tensors: tuple[str, ...] | None = None
    collection: str | None = None
    regex: str | None = None
    mode: ModeKeys | None = None
    start_step: int | None = None
    end_step: int | None = None
    include_values: bool = False
    window_steps: int = DEFAULT_WINDOW_STEPS

    @classmethod
    def of(cls, *, tensors: str | list[str] | tuple[str, ...] | None = None,
           collection: str | None = None, regex: str | None = None,
           mode: object = None, start_step: int | None = None, end_step: int | None = None,
           include_values: bool = False, window_steps: int = DEFAULT_WINDOW_STEPS) -> Selection:
        """A checked selection from the keyword arguments of the export functions."""
        if isinstance(tensors, str):
            tensors = (tensors,)
        elif tensors is not None:
            tensors = tuple(tensors)
        for name, v in (("start_step", start_step), ("end_step", end_step)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise SMDebugValueError(f"{name}={v!r} must be None or an int >= 0")
        if start_step is not None and end_step is not None and end_step <= start_step:
            raise SMDebugValueError(
                f"end_step={end_step} must be greater than start_step={start_step}")
        if isinstance(window_steps, bool) or not isinstance(window_steps, int) or window_steps < 1:
            raise SMDebugValueError(f"window_steps={window_steps!r} must be an int >= 1")
        return cls(tensors=tensors, collection=collection, regex=regex,
                   mode=None if mode is None else parse_mode(mode), start_step=start_step,
                   end_step=end_step, include_values=bool(include_values),
                   window_steps=window_steps)

    def in_range(self, step: int) -> bool:
        return ((self.start_step is None or step >= self.start_step)
                and (self.end_step is None or step < self.end_step))
