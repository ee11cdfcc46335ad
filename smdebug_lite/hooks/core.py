"""What every hook shares: configuration, which tensors to save when, and the failure policy.

A hook is this core, its parts (each in its own module) and a framework adapter:

* `arguments` (the constructor's arguments, resolved) and `collections` (`config.hook_collections`);
* `steps`, the step machine (`step_machine`): every path through a step, its counters on
  `cursor` (`step_cursor`), the steady saving cycle (`steady_cycle`) and replays;
* `plans` (`capture_plan`): which tensors, which reductions, at the current step;
* `storage`, the out_dir opened once, and `trial_output` (`trial_output`): the worker's identity,
  the claim, the writer, the collections file; `stop_signal` reads the same storage;
* `side_outputs` (`side_outputs`): TensorBoard and SageMaker Metrics.

Framework adapters (`smdebug_lite.pytorch`, `.tensorflow`, `.xgboost`) find tensors and turn them
into numpy arrays (computing reductions with the framework's own ops); they give the step
machine a `Capture` (`step_capture()`), and call:

    core.start_step()                 # a new step begins (or core.set_step(n) for XGBoost)
    plan = core.plan(name)            # None when nothing is to be saved for `name` now
    core.write(plan, raw=..., reductions={(name, abs): array}, shape=...)
    core.end_step()                   # optional: submit the step now (else at the next start)
    core.close()

Everything an adapter runs on the training thread goes through `core.failsafe(...)`: an internal
error is logged once, loudly, with the cause, and the hook disables itself; training goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import os
import threading
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from smdebug_lite.config.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
    default_include_collections,
)
from smdebug_lite.config.hook_collections import resolve_collections
from smdebug_lite.config.hook_json import HookSettings, parse_hook_config
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.reductions import reduction_tensor_name
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugRuntimeError, TrialStorageError
from smdebug_lite.format.locations import END_OF_JOB_FILE
from smdebug_lite.format.tensor_codec import unwrap_quantized
from smdebug_lite.hooks import registry, shutdown
from smdebug_lite.hooks.arguments import (
    HookArguments,
    check_hook_arguments,
    check_start_step,
    hook_constructor,
)
from smdebug_lite.hooks.capture_plan import CapturePlan, TensorPlan
from smdebug_lite.hooks.side_outputs import (
    SageMakerMetricsOutput,
    SideOutputs,
    TensorBoardOutput,
)
from smdebug_lite.hooks.step_cursor import StepCursor
from smdebug_lite.hooks.step_machine import Capture, StepMachine
from smdebug_lite.hooks.training_state import TrainingState
from smdebug_lite.hooks.trial_output import SilentDisable, TrialOutput
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import is_s3_path, open_storage
from smdebug_lite.storage.stop_signal import StopSignalPoller
from smdebug_lite.writer import PendingStep, ProcessTrialWriter, TrialWriter, WriteFailed
from smdebug_lite.writer.sagemaker_metrics import SageMakerMetrics

logger = get_logger(__name__)
_H = TypeVar("_H", bound="HookCore")

SCALAR_PREFIX = "scalar/"


def to_numpy_value(value) -> np.ndarray:
    """smdebug's conversion for non-framework values: Python/numpy scalars become shape (1,).
    TensorFlow's quantized records (``tf.qint8.as_numpy_dtype``) become their plain integers."""
    if isinstance(value, np.ndarray):
        return unwrap_quantized(value)
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return unwrap_quantized(np.array([value]))
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    if isinstance(value, str):
        return np.array([value])
    return np.asarray(value)


def _on_part(path: str, doc: str) -> property:
    """An attribute kept on one of the hook's parts (``"part.name"``), read and set through the
    hook as smdebug's hooks had it (read by `operator.attrgetter`: no Python call)."""
    part, name = path.split(".")

    def set_value(self: Any, value: Any) -> None:
        setattr(getattr(self, part), name, value)

    return property(operator.attrgetter(path), set_value, doc=doc)


class HookCore:
    """Base of every hook. Subclasses set `framework`, may override the worker methods, and
    give the step machine their `Capture` (`step_capture`).

    Its parts are listed in the module docstring. Adapters use those parts' public methods and
    the core's; none reaches into another object's private state, and none moves the step
    cursor: steps begin and end through `steps` (or the core's `start_step`/`end_step`)."""

    framework = "pytorch"
    default_save_interval = 500
    keep_tf_suffix = False
    # Collections the adapter fills by what a tensor is, not by regex (Keras weights, layers...):
    # empty regexes there are expected, not a configuration mistake.
    adapter_collections: frozenset[str] = frozenset()
    # Whether the hook acts on `detect_non_finite` (docs/live.md); others warn once and ignore it.
    detects_non_finite = False

    @hook_constructor()
    def __init__(self, shared: dict[str, Any]) -> None:
        args = check_hook_arguments(**shared)  # (one place for every framework: hooks/arguments.py)
        self.arguments = self._resolved(args)
        args = self.arguments
        if args.detect_non_finite and not self.detects_non_finite:
            logger.warning("detect_non_finite: the %s hook does not check for non-finite values "
                           "yet; it is ignored", self.framework)
        self.collections = resolve_collections(self.framework, args.include_regex,
                                               args.include_collections, args.save_all)
        # The out_dir, opened once: the writer, the stop signal, the claim and the end marker
        # all use this one.
        self.storage = open_storage(args.out_dir)
        self.trial_output = TrialOutput(args, self.storage)
        self.cursor = StepCursor()
        self.plans = CapturePlan(self._collections_of)
        self.side_outputs = SideOutputs()
        self.steps = StepMachine(self, self.cursor, self.plans, self.step_capture())
        self.disabled = False
        self._prepared = False
        self._warned_unmatched: set[str] = set()
        self._all_matched: set[frozenset[int]] = set()  # saving sets `report_unmatched` is done with
        self._closed = False
        self._lock = threading.RLock()
        self.stop_signal = StopSignalPoller(self.storage)
        self.trial_output.identify(self._worker_name(), self._num_workers(),
                                   self._chief_worker_name())
        if self.tensorboard_dir:
            self.side_outputs.add(TensorBoardOutput(self.tensorboard_dir))
        metrics = None if self.dry_run else SageMakerMetrics.for_this_job()
        if metrics is not None:
            self.side_outputs.add(SageMakerMetricsOutput(metrics))
        self.training_state = None if self.dry_run else TrainingState.for_this_job()
        if self.training_state is not None:
            resumed = self.cursor.resume(self.training_state)
            if resumed is not None:
                self.last_saved_step = resumed[1]
                logger.info("smdebug-lite: resuming step counters from %s: the next step is %d",
                            self.training_state.path, self.step + 1)
        if not self.dry_run:
            self._check_out_dir()
        shutdown.track(self)  # (closed at exit or on SIGTERM if the script does not close it)
        registry.set_current(self)  # as in smdebug, the newest hook is the process's current one

    def _resolved(self, args: HookArguments) -> HookArguments:
        """The arguments with their defaults worked out: an absolute local out_dir, the
        TensorBoard directory, the framework's save interval, raw tensors saved."""
        out_dir = args.out_dir
        if not is_s3_path(out_dir):
            out_dir = os.path.abspath(os.path.expanduser(out_dir))
        save_config = args.save_config or SaveConfig(save_interval=self.default_save_interval)
        save_config.merge_default_save_config(
            None, SaveConfigMode(save_interval=self.default_save_interval))
        return dataclasses.replace(
            args, out_dir=out_dir, save_config=save_config,
            tensorboard_dir=args.tensorboard_dir or (
                os.path.join(out_dir, "tensorboard") if args.export_tensorboard else None),
            reduction_config=args.reduction_config or ReductionConfig(save_raw_tensor=True))

    def step_capture(self) -> Capture:
        """The framework's side of a step (`step_machine.Capture`); called once, while the core
        is built. This one captures nothing: the adapter writes what it finds as it goes."""
        return Capture()

    @staticmethod
    def inert_state() -> dict[str, Any]:
        """The attributes of a hook that is closed and does nothing (what a pickled hook is
        until it is built again, `xgboost.Hook.__setstate__`)."""
        return {"disabled": True, "_closed": True, "_lock": threading.RLock()}

    # -- the arguments, the collections, the trial output: as smdebug's hooks showed them ------

    out_dir = _on_part("arguments.out_dir", "The out_dir: an absolute path or an s3:// URI.")
    dry_run = _on_part("arguments.dry_run", "Nothing is written.")
    export_tensorboard = _on_part("arguments.export_tensorboard", "TensorBoard files are written.")
    tensorboard_dir = _on_part("arguments.tensorboard_dir", "Where TensorBoard files go, if any.")
    save_config = _on_part("arguments.save_config", "The hook's save schedule.")
    reduction_config = _on_part("arguments.reduction_config", "The hook's reductions.")
    include_workers = _on_part("arguments.include_workers", '"one" or "all".')
    save_all = _on_part("arguments.save_all", "Every collection is included.")
    collection_manager = _on_part("collections.manager", "The hook's collections.")
    include_collections = _on_part("collections.included", "The included collections' names.")
    worker = _on_part("trial_output.worker", "This worker's name (worker_0, ...).")
    num_workers = _on_part("trial_output.num_workers", "How many workers the run has.")
    chief = _on_part("trial_output.chief", "This worker is the chief.")
    writes = _on_part("trial_output.writes", "This worker writes the trial.")
    last_saved_step = _on_part("steps.last_saved_step", "The last step handed to the writer.")

    # -- the step cursor's counters, as smdebug's hooks showed them ----------------------------

    @property
    def mode(self) -> ModeKeys:
        return self.cursor.mode

    @property
    def step(self) -> int:
        return self.cursor.step

    @step.setter
    def step(self, value: int) -> None:
        self.cursor.step = value

    @property
    def mode_steps(self) -> dict[ModeKeys, int]:
        return self.cursor.mode_steps

    @property
    def mode_step(self) -> int:
        return self.cursor.mode_steps.get(self.cursor.mode, -1)

    # -- what adapters may ask ------------------------------------------------------------------

    @property
    def trial_writer(self) -> TrialWriter | ProcessTrialWriter | None:
        """The writer of this hook's trial files, once the first step was handed over."""
        return self.trial_output.writer

    @property
    def pending_step(self) -> PendingStep | None:
        """The current step's tensors so far (None when the step saves nothing)."""
        return self.steps.pending

    @property
    def has_deferred_saves(self) -> bool:
        """Values saved before the first step, written when it starts."""
        return bool(self.steps.deferred)

    # (read at every step the step machine begins: no Python call)
    prepared = property(operator.attrgetter("_prepared"), doc=(
        "Every collection has its complete configuration (from the first step on)."))

    def names_settled(self, saving_ids: frozenset[int]) -> bool:
        """Whether every collection of this saving set matched a tensor (or was reported)."""
        return saving_ids in self._all_matched

    # -- from SageMaker's DebugHookConfig ------------------------------------------------------

    @classmethod
    def create_from_json_file(cls: type[_H], json_file_path: str | None = None) -> _H:
        """The hook SageMaker's DebugHookConfig JSON describes (`json_file_path`, else
        $SMDEBUG_CONFIG_FILE_PATH, else /opt/ml/input/config/debughookconfig.json).
        Raises FileNotFoundError when there is none and HookConfigError when it is unusable."""
        settings = parse_hook_config(json_file_path, default_values=cls._json_default_values())
        return cls.from_hook_settings(settings)

    @classmethod
    def from_hook_settings(cls: type[_H], settings: HookSettings) -> _H:
        """The hook that parsed DebugHookConfig settings describe, collections configured."""
        hook = cls(**cls._json_hook_kwargs(settings.hook_kwargs()))
        settings.apply_to(hook.collection_manager)
        hook.collections_configured()
        return hook

    hook_from_config = create_from_json_file  # the name smdebug's get_hook used

    @classmethod
    def _json_default_values(cls) -> dict[str, Any] | None:
        """Defaults for keys the JSON leaves out (a framework's own save_interval)."""
        return None

    @classmethod
    def _json_hook_kwargs(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The constructor arguments, for a framework whose hook takes fewer."""
        return kwargs

    def collections_configured(self) -> None:
        """Collections were configured from outside the constructor (adapters convert them)."""

    # -- worker identity (framework adapters override) -------------------------------------

    def _worker_name(self) -> str:
        return "worker_0"

    def _num_workers(self) -> int:
        return 1

    def _chief_worker_name(self) -> str:
        return "worker_0"

    def _refresh_worker_identity(self) -> None:
        """Ask again who this worker is. Hooks are often built before the distributed runtime
        starts (a zero-code-change hook always is), so the first step re-checks."""
        if self.trial_output.writer is None:  # (nothing changes once it writes)
            self.trial_output.identify(self._worker_name(), self._num_workers(),
                                       self._chief_worker_name())

    # -- configuration -------------------------------------------------------------------------

    def get_collection(self, name: str, create: bool = True) -> Collection:
        regexes = self.collections.extensions.get(name)
        if regexes is None or not create or name in self.collection_manager.collections:
            return self.collection_manager.get(name, create_if_not_exists=create)
        coll = self.collection_manager.get(name, create_if_not_exists=True)
        coll.include(regexes)
        return coll

    def get_collections(self) -> dict[str, Collection]:
        return self.collection_manager.collections

    def has_default_hook_configuration(self) -> bool:
        return set(self.include_collections) == set(default_include_collections(self.framework))

    def _check_out_dir(self) -> None:
        """Refuse an out_dir holding a finished run (a mistake in the script: raised). An S3
        out_dir that S3 refuses (credentials, permissions, a missing bucket, no endpoint) is
        not the script's mistake: reported once, loudly, and the hook disables itself."""
        storage = self.storage
        if is_s3_path(self.out_dir):
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                # A listing, as smdebug made: unlike a HEAD request, its errors carry S3's
                # error code, and it tells a missing bucket from a missing object.
                finished = END_OF_JOB_FILE in storage.list(END_OF_JOB_FILE)
            except (TrialStorageError, ClientError, BotoCoreError) as e:
                self._refuse_storage(e)
                return
        else:
            finished = storage.exists(END_OF_JOB_FILE)
        if finished:
            raise SMDebugRuntimeError(
                f"out_dir {self.out_dir} already holds a finished training run "
                f"({END_OF_JOB_FILE} exists); choose a new out_dir so that saved data is not mixed"
            )

    def _refuse_storage(self, error: Exception) -> None:
        """The out_dir cannot be used: one error naming the URI and S3's answer (its error code
        and message, never the credentials), then the hook stays out of training's way."""
        if isinstance(error, TrialStorageError):  # (storage's verdict after its retries)
            code, message = error.code or type(error).__name__, error.reason
        else:
            response = getattr(error, "response", None) or {}
            details = response.get("Error", {}) if isinstance(response, dict) else {}
            code = details.get("Code") or type(error).__name__
            message = str(details.get("Message") or error)
        self.trial_output.refuse()
        self.disabled = True
        logger.error(
            "smdebug-lite cannot use the out_dir %s (S3: %s: %s). The hook is disabled for this "
            "run and training continues without saving tensors; check the bucket, the endpoint "
            "and the permissions of the job's credentials.", self.out_dir, code, message[:400])

    def _prepare_collections(self) -> None:
        """Give every collection complete save and reduction configs (inherited from the hook)."""
        self.cursor.quiet_left = 0
        # Included names the manager does not know yet (custom collections) are created first,
        # so that they get configs like every other collection.
        explicit = [self._included_collection(n) for n in self.include_collections]
        explicit_ids = frozenset(map(id, explicit))
        included = list(explicit)
        if self.save_all:
            # As in smdebug, save_all includes every collection: each one learns the names of
            # the tensors it matches (the collections file lists them) and adds its own
            # settings to theirs. Only the explicitly included ones are reported as unmatched.
            included += [c for c in self.collection_manager.collections.values()
                         if id(c) not in explicit_ids]
        for coll in explicit:
            if not coll.include_regex and not coll.tensor_names and coll.name not in (
                CollectionKeys.ALL, CollectionKeys.DEFAULT
            ) and coll.name not in self._warned_unmatched and (
                coll.name not in self.adapter_collections
            ):
                self._warned_unmatched.add(coll.name)
                logger.warning(
                    "Collection %r is included but has neither include_regex nor tensor names, so "
                    "it cannot match anything; configure it with hook.get_collection(%r).include(...)",
                    coll.name, coll.name)
        for coll in self.collection_manager.collections.values():
            if coll.save_config is None:
                coll.save_config = self.save_config.copy()
            else:
                coll.save_config.merge_default_save_config(
                    self.save_config, SaveConfigMode(save_interval=self.default_save_interval)
                )
            if coll.name in NON_HISTOGRAM_COLLECTIONS:
                coll.save_histogram = False
            if coll.name in SCALAR_COLLECTIONS:
                coll.reduction_config = ReductionConfig(save_raw_tensor=True)
            elif coll.reduction_config is None:
                coll.reduction_config = self.reduction_config.copy()
        self.plans.set_included(included, explicit_ids)
        self.cursor.reset()
        self._prepared = True

    def prepare_collections(self) -> None:
        """Work the collections' configuration out again (after changing it during training)."""
        self._prepare_collections()

    def _included_collection(self, name: str) -> Collection:
        """The included collection `name`, created if needed; an extension built-in created
        empty elsewhere (a DebugHookConfig entry without a regex) gets its regex."""
        coll = self.get_collection(name)
        regexes = self.collections.extensions.get(name)
        if regexes is not None and not coll.include_regex and not coll.tensor_names:
            coll.include(regexes)
        return coll

    def _collections_of(self, included: list[Collection], name: str) -> list[Collection]:
        """The included collections that hold `name` (adapters that know what a tensor is
        override it; `plans` caches the answer)."""
        return [c for c in included if c.matches(name)]

    # -- steps ---------------------------------------------------------------------------------

    def set_mode(self, mode) -> None:
        self.cursor.set_mode(mode)

    def start_step(self, step: int | None = None, mode: ModeKeys | str | None = None) -> None:
        """Begin a new step: the step before ends (what it saved goes to the writer), `mode`
        becomes the mode if given, and the new step is numbered `step` if given (greater than
        the current step; the steps skipped count as steps of the mode too), else the next
        one. Then decides what the new step saves. Raises SMDebugTypeError/SMDebugValueError
        naming a bad argument."""
        if step is not None or mode is not None:
            step, mode = check_start_step(step, mode, self.step)
            if mode is not None:
                self.set_mode(mode)
        self.steps.next_step(step)

    def _increment_step(self) -> None:
        """smdebug's name for beginning the next step of the current mode (framework
        integrations built on its hooks call it)."""
        self.start_step()

    def should_save_tensor_or_collection(self, tensor_name: str, collection_name: str) -> bool:
        """Whether this step saves `tensor_name` as part of `collection_name` (for gradients,
        the name of the variable whose gradient it is), as smdebug's integrations ask before
        computing a tensor. False until the collections are prepared (the first step)."""
        if not self._prepared or self.disabled:
            return False
        if collection_name == CollectionKeys.GRADIENTS:
            tensor_name = f"gradients/{tensor_name.split(':')[0]}Grad"
        for coll in self.plans.saving:
            if coll.name == collection_name:
                return not coll.include_regex or coll.matches(tensor_name)
        return self.plan(tensor_name) is not None

    def quiet_steps_ahead(self) -> int:
        """Set the countdown of quiet steps (see `StepMachine.quiet_steps_ahead`)."""
        return self.steps.quiet_steps_ahead()

    def set_step(self, step: int, mode=None) -> None:
        """Frameworks that know their own step (XGBoost iterations) set it directly."""
        self.steps.set_step(step, mode)

    def prepare_first_step(self) -> None:
        """The first step begins: who this worker is, asked again, and every collection's
        complete configuration."""
        self._refresh_worker_identity()
        self._prepare_collections()

    @property
    def saving_this_step(self) -> bool:
        return bool(self.plans.saving)

    def end_step(self) -> None:
        """Hand the current step to the writer (its files appear once written)."""
        self.steps.end()

    # -- what to save --------------------------------------------------------------------------

    def plan(self, name: str) -> TensorPlan | None:
        """What to save for `name` at this step, or None (cheap when nothing is saved). A
        disabled hook whose captures are collectives plans as before (`Capture.collective`)."""
        if not self.plans.saving or (self.disabled and not self.steps.capture.collective):
            return None
        return self.plans.plan(name)

    def write(
        self,
        plan: TensorPlan,
        raw: np.ndarray | None = None,
        reductions: dict[tuple[str, bool], np.ndarray] | None = None,
        shape: tuple[int, ...] | None = None,
        wall_time: float | None = None,
    ) -> None:
        """Record what `plan` asked for into the current step (raw must be a private copy).
        `wall_time` defaults to now (an adapter writing a whole step at once passes one)."""
        sw = self.steps.pending
        if self.dry_run:
            logger.debug("dry_run: would save %s at step %d", plan.name, self.step)
            return
        if sw is None:
            return
        if wall_time is None:
            wall_time = time.time()
        if plan.save_shape and shape is not None:
            sw.add_shape(plan.name, shape)
        if reductions:
            for (red, is_abs), value in reductions.items():
                sw.add_tensor(reduction_tensor_name(plan.name, red, is_abs, self.keep_tf_suffix),
                              value, wall_time)
        if raw is not None and plan.save_raw:
            sw.add_tensor(plan.name, raw, wall_time)
        if raw is not None and self.side_outputs.live:
            self.side_outputs.tensor_saved(plan, raw, sw.step, sw.mode, sw.mode_step, wall_time)

    def write_step(self, items: list[tuple[TensorPlan, np.ndarray | None, dict | None, tuple]],
                   wall_time: float) -> None:
        """`write` for every (plan, raw, reductions, shape) an adapter captured in a step. A
        step of raw tensors only (the usual case) goes into the step writer in one piece."""
        sw = self.steps.pending
        if sw is not None and not self.side_outputs.live and not self.dry_run:
            entries = [(plan.name, raw, wall_time) for plan, raw, reductions, _ in items
                       if raw is not None and plan.save_raw and not reductions and not plan.save_shape]
            if len(entries) == len(items):
                sw.add_tensors(entries)
                return
        for plan, raw, reductions, shape in items:
            self.write(plan, raw, reductions, shape, wall_time)

    # -- user-facing saving ---------------------------------------------------------------------

    def save_scalar(self, name: str, value, sm_metric: bool = False, timestamp: float | None = None) -> None:
        """Save a scalar in the step and mode it is called in (smdebug wrote it into whichever
        step flushed next, and deadlocked when called before the first step). With `sm_metric`
        on a SageMaker training job it is also sent to SageMaker Metrics as `scalar/<name>_<MODE>`."""
        with self.failsafe("save_scalar"):
            arr = to_numpy_value(value)
            wall = time.time() if timestamp is None else float(timestamp)
            tag = SCALAR_PREFIX + name
            step = self.step
            if step < 0:
                self.side_outputs.scalar_saved(tag, arr, wall, step, self.mode, self.mode_step,
                                               sm_metric)
                self.steps.deferred.append(
                    lambda: self.scalar_pending_step().add_tensor(tag, arr, wall))
                return
            if self.writes:
                self.scalar_pending_step().add_tensor(tag, arr, wall)
            self.side_outputs.scalar_saved(tag, arr, wall, step, self.mode, self.mode_step,
                                           sm_metric)

    def scalar_pending_step(self) -> PendingStep:
        """The current step's writer, made for a value saved outside the schedule (a scalar):
        the step now has something to hand over when it ends."""
        return self.steps.scalar_pending()

    def save_tensor(self, tensor_name: str, tensor_value, collections_to_write: str | Iterable[str] = "default") -> None:
        """Save a value under `tensor_name` in every named collection (created if needed) that
        saves the current step. smdebug kept only the last collection and crashed on new ones."""
        with self.failsafe("save_tensor"):
            names = [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
            if not self._prepared:
                self._prepare_collections()
            changed = False
            for cname in names:
                coll = self.collection_manager.get(cname, create_if_not_exists=True)
                coll.add_tensor_name(tensor_name)
                if coll.save_config is None or coll.reduction_config is None:
                    changed = True
                if cname not in self.include_collections:
                    self.include_collections.append(cname)
                    changed = True
            if changed:
                self._prepare_collections()
            arr = self._to_numpy(tensor_value)
            if self.step < 0:
                self.steps.deferred.append(lambda: self._save_tensor_now(tensor_name, arr))
                return
            if changed:
                self.steps.recheck_saving()
            self._save_tensor_now(tensor_name, arr)

    def _save_tensor_now(self, tensor_name: str, arr: np.ndarray) -> None:
        plan = self.plan(tensor_name)
        if plan is not None:
            self.write(plan, raw=arr, reductions=self._numpy_reductions(plan, arr), shape=arr.shape)

    def _to_numpy(self, value) -> np.ndarray:
        """Adapters override to convert framework tensors (copying: values may change later)."""
        return np.array(to_numpy_value(value), copy=True)

    @staticmethod
    def _numpy_reductions(plan: TensorPlan, arr: np.ndarray) -> dict[tuple[str, bool], np.ndarray]:
        from smdebug_lite.config.reductions import reduce_array as compute

        return {pair: compute(arr, *pair) for pair in plan.reductions}

    # -- writer, collections file ----------------------------------------------------------------

    def maybe_export_collections(self) -> None:
        """Write the collections file after the first saved step, and again whenever collections
        learned new tensor names (smdebug wrote it once, so later tensors were missing)."""
        self.trial_output.export_collections(self.collection_manager)

    def allow_unmatched(self, name: str) -> None:
        """Collection `name` may stay empty without a warning (what the adapter knows)."""
        self._warned_unmatched.add(name)

    def report_unmatched(self, first_only: bool) -> None:
        """Warn, once each, about explicitly included collections that matched no tensor in
        the step (`first_only`: not again for a saving set already reported)."""
        plans = self.plans
        if first_only and plans.saving_ids in self._all_matched:
            return  # every one of these collections has matched (or been reported) already
        unsettled = False
        explicit = plans.explicit_ids
        for c in plans.saving:
            if (c.name in plans.matched or c.name in self._warned_unmatched or c.tensor_names
                    or id(c) not in explicit):  # (included by save_all only: nothing to report)
                continue
            if c.name in (CollectionKeys.ALL, CollectionKeys.DEFAULT) and not c.include_regex:
                unsettled = True  # (it may still get a regex or tensor names)
                continue
            self._warned_unmatched.add(c.name)
            logger.warning(
                "Collection %r (regex %s) matched no tensor at step %d (%s); %s", c.name,
                c.include_regex or "none", self.step, self.mode.name, self._unmatched_hint(c))
        if not unsettled:
            self._all_matched.add(plans.saving_ids)

    def _unmatched_hint(self, coll: Collection) -> str:
        """What to check when `coll` saved nothing (a framework knows likelier causes)."""
        return "check its include_regex or tensor names"

    # -- rule feedback ------------------------------------------------------------------------

    def stop_requested(self) -> bool:
        """True once a rule's local stop-signal action fired for this out_dir.

        Training loops that want rules to stop them check this (it is rate-limited, so it is
        cheap to call every step): ``if hook.stop_requested(): break``.
        """
        try:
            return self.stop_signal.should_stop()
        except Exception as e:  # a storage hiccup must not stop training
            logger.debug("stop-signal check failed: %s", e)
            return False

    # -- failure policy and shutdown ----------------------------------------------------------------

    @contextlib.contextmanager
    def failsafe(self, where: str) -> Iterator[None]:
        """Run hook work so that no internal error reaches the training loop."""
        if self.disabled:
            with contextlib.suppress(Exception):  # already reported once; stay out of the way
                yield
            return
        try:
            yield
        except SilentDisable:
            self.disabled = True
            self.cursor.quiet_left = 0
        except Exception as e:
            self.disable(where, e)

    def disable(self, where: str, error: BaseException) -> None:
        if self.disabled:
            self.steps.halt()
            return
        self.disabled = True
        self.steps.stop()
        if isinstance(error, WriteFailed):
            # Not a fault of the hook (a full disk, S3 refusing writes): no traceback, and
            # `close` does not report it again.
            self.trial_output.failure_reported = True
            logger.error("smdebug-lite stopped saving tensors for the rest of this run (%s); "
                         "training continues, and the steps written before stay readable", error)
            return
        logger.error(
            "smdebug-lite hook failed in %s and is now disabled for the rest of this run; "
            "training continues without saving tensors. Cause: %s: %s\n%s",
            where, type(error).__name__, error, "".join(traceback.format_exception(error)))

    def _cleanup(self) -> None:
        """smdebug's name for the end-of-run close; its tests and scripts call it directly."""
        self.close()

    closed = property(operator.attrgetter("_closed"), doc="`close` was called.")

    def close(self) -> None:
        """Write the last step, the collections file and the end marker; wait for uploads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.cursor.quiet_left = 0
        try:
            if not self.disabled:
                with self.failsafe("close"):
                    self.end_step()
                    self.report_unmatched(first_only=False)
                    if self.training_state is not None and self.chief:
                        # A checkpoint written after the last step is recorded too.
                        self.training_state.maybe_record(self.step, self.mode_steps,
                                                         self.last_saved_step, now=True)
            # Even a hook that disabled itself ends the run cleanly on disk (collections file,
            # end marker): readers waiting for data learn that training is over instead of
            # waiting out their timeout, and what was saved before the failure stays readable.
            if self.writes:
                self.trial_output.finish(self.collection_manager)
                self.mark_training_end()
                if self.chief:  # one writer: the index is compacted (SMDEBUG_COMPACT=0: not)
                    from smdebug_lite.writer.compaction import compact_at_close

                    compact_at_close(self.storage)
            self.side_outputs.close()
        finally:
            self.trial_output.release()
            shutdown.forget(self)

    def mark_training_end(self) -> None:
        """Write the end marker unless the writer did. After a failed writer (a full disk, S3
        refusing writes) it did not, yet readers must learn that no step is coming any more: a
        zero-byte file, written straight to storage (it needs no free block on a full disk).
        Not on SageMaker, where the platform writes it."""
        self.trial_output.mark_training_end()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["HookCore", "TensorPlan", "reduction_tensor_name", "to_numpy_value"]
