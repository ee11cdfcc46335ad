"""What every hook shares: steps and modes, which tensors to save when, and the failure policy.

Framework adapters (`smdebug_lite.pytorch`, `.tensorflow`, `.xgboost`) only find tensors and turn
them into numpy arrays (computing reductions with the framework's own ops). They call:

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
import math
import os
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from smdebug_lite.config.collection import (
    EVAL_PREDICT_SKIPPED_COLLECTIONS,
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    Collection,
    CollectionKeys,
    builtin_collections,
    default_include_collections,
    tensor_names_version,
)
from smdebug_lite.config.collection_manager import CollectionManager
from smdebug_lite.config.hook_json import parse_hook_config
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import (
    GENERATION,
    SaveConfig,
    SaveConfigMode,
)
from smdebug_lite.exceptions import SMDebugRuntimeError, TrialStorageError
from smdebug_lite.format.locations import CLAIM_FILE, END_OF_JOB_FILE
from smdebug_lite.format.tensor_codec import LOW_PRECISION_FLOATS
from smdebug_lite.hooks import shutdown
from smdebug_lite.hooks.arguments import check_hook_arguments
from smdebug_lite.hooks.training_state import TrainingState
from smdebug_lite.logger import get_logger
from smdebug_lite.modes import ModeKeys, parse_mode
from smdebug_lite.storage import is_s3_path, open_storage
from smdebug_lite.writer.sagemaker_metrics import SageMakerMetrics
from smdebug_lite.writer.step_writer import StepWriter
from smdebug_lite.writer.trial_writer import TrialWriter, on_sagemaker
from smdebug_lite.writer.write_failed import WriteFailed
from smdebug_lite.writer.writer_process import ProcessTrialWriter, open_trial_writer

logger = get_logger(__name__)
_H = TypeVar("_H", bound="HookCore")

REDUCTION_PREFIX = "smdebug/reductions/"
SCALAR_PREFIX = "scalar/"
_TF_SUFFIX = re.compile(r":\d+")
_FOREVER = 1 << 62  # quiet steps ahead when no collection ever saves again


def reduction_tensor_name(tensor_name: str, reduction: str, is_abs: bool, keep_tf_suffix: bool = False) -> str:
    """smdebug's name for a saved reduction, e.g. smdebug/reductions/abs_mean/gradient/fc.bias."""
    base = tensor_name if keep_tf_suffix else _TF_SUFFIX.sub("", tensor_name)
    return f"{REDUCTION_PREFIX}{'abs_' if is_abs else ''}{reduction}/{base}"


def to_numpy_value(value) -> np.ndarray:
    """smdebug's conversion for non-framework values: Python/numpy scalars become shape (1,)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return np.array([value])
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    if isinstance(value, str):
        return np.array([value])
    return np.asarray(value)


@dataclass(slots=True)
class TensorPlan:
    """What to write for one tensor at the current step, merged over its collections."""

    name: str
    save_raw: bool = False
    reductions: list[tuple[str, bool]] = field(default_factory=list)
    save_shape: bool = False
    histogram: bool = False
    tb_scalar: bool = False
    sm_metric: bool = False  # also sent to SageMaker Metrics (losses, metrics, sm_metrics)
    collections: list[Collection] = field(default_factory=list)


class HookCore:
    """Base of every hook. Subclasses set `framework` and may override the worker methods."""

    framework = "pytorch"
    default_save_interval = 500
    keep_tf_suffix = False
    # Collections the adapter fills by what a tensor is, not by regex (Keras weights, layers...):
    # empty regexes there are expected, not a configuration mistake.
    adapter_collections: frozenset[str] = frozenset()

    def __init__(
        self,
        out_dir: str,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict | None = None,
        include_regex: str | Iterable[str] | None = None,
        include_collections: str | Iterable[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
    ) -> None:
        args = check_hook_arguments(  # (one place for every framework: hooks/arguments.py)
            out_dir, export_tensorboard, tensorboard_dir, dry_run, reduction_config, save_config,
            include_regex, include_collections, save_all, include_workers)
        out_dir, include_regex, include_collections = (
            args.out_dir, args.include_regex, args.include_collections)
        self.out_dir = out_dir if is_s3_path(out_dir) else os.path.abspath(os.path.expanduser(out_dir))
        self.dry_run = args.dry_run
        self.export_tensorboard = args.export_tensorboard
        self.tensorboard_dir = args.tensorboard_dir or (
            os.path.join(self.out_dir, "tensorboard") if self.export_tensorboard else None
        )
        self.save_config = args.save_config or SaveConfig(save_interval=self.default_save_interval)
        self.save_config.merge_default_save_config(
            None, SaveConfigMode(save_interval=self.default_save_interval)
        )
        self.reduction_config = args.reduction_config or ReductionConfig(save_raw_tensor=True)
        self.include_workers = args.include_workers
        self.save_all = args.save_all
        self._storage_refused = False  # (see `_check_out_dir`)

        self.collection_manager = CollectionManager()
        plain = builtin_collections(self.framework)
        for name, regexes in plain.items():
            self.collection_manager.get(name, create_if_not_exists=True).include(regexes)
        # smdebug-lite's extra built-ins (PyTorch inputs/outputs) exist only once asked for:
        # included, or fetched with get_collection. smdebug's collections file never listed them.
        extended = builtin_collections(self.framework, extensions=True)
        self._extension_collections = {n: r for n, r in extended.items() if n not in plain}
        self.include_collections: list[str] = []
        if isinstance(include_collections, str):
            include_collections = [include_collections]
        for name in list(include_collections or []) + default_include_collections(self.framework):
            if name not in self.include_collections:
                self.include_collections.append(name)
        if include_regex:
            regexes = [include_regex] if isinstance(include_regex, str) else list(include_regex)
            self.collection_manager.get(CollectionKeys.DEFAULT).include(regexes)
            if CollectionKeys.DEFAULT not in self.include_collections:
                self.include_collections.append(CollectionKeys.DEFAULT)
        if self.save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            if CollectionKeys.ALL not in self.include_collections:
                self.include_collections.append(CollectionKeys.ALL)

        self.mode = ModeKeys.GLOBAL
        self.step = -1
        self.mode_steps: dict[ModeKeys, int] = {ModeKeys.GLOBAL: -1}
        self.disabled = False
        self._write_failure_reported = False  # (see `disable`)
        self.last_saved_step: int | None = None
        self._prepared = False
        self._included: list[Collection] = []
        self._explicit_ids: frozenset[int] = frozenset()  # of collections included by name
        self._match_cache: dict[str, list[Collection]] = {}
        # Plans depend only on the name and on which collections save this step: one cache per
        # set of saving collections, so that steps alternating between sets (weights every 10
        # steps, losses every step) reuse their plans (a plan is never mutated once built).
        self._plan_caches: dict[frozenset[int], dict[str, TensorPlan | None]] = {}
        self._plan_cache: dict[str, TensorPlan | None] = {}
        self._plan_key: frozenset[int] = frozenset()
        self._saving_ids: frozenset[int] = frozenset()
        # mode -> (schedule generation, mode step checked, next mode step at which an included
        # collection saves): steps strictly between the two skip the per-collection checks.
        self._quiet: dict[ModeKeys, tuple[int, int, float]] = {}
        self._schedules: dict[ModeKeys, tuple[int, tuple]] = {}  # see `_schedule`
        # Steps an adapter may still start in one go, valid while GENERATION[0] is _quiet_gen
        # (see `_quiet_steps_ahead`).
        self._quiet_left = 0
        self._quiet_gen = -1
        self._saving: list[Collection] = []
        self._step_writer: StepWriter | None = None
        # save_scalar/save_tensor calls made before the first step began: replayed at its start
        # (smdebug's step counter started at 0, so such values landed in step 0).
        self._before_first_step: list[Callable[[], None]] = []
        self._matched: set[str] = set()
        self._warned_unmatched: set[str] = set()
        self._all_matched: set[frozenset[int]] = set()  # saving sets `_report_unmatched` is done with
        self._exported_version: int = -1  # tensor_names_version() last written
        self._writer: TrialWriter | ProcessTrialWriter | None = None
        self._tb = None
        self._sm_metrics = None if self.dry_run else SageMakerMetrics.for_this_job()
        self._claimed = False
        self._closed = False
        self._lock = threading.RLock()
        self.worker = self._worker_name()
        self.num_workers = self._num_workers()
        self.chief = self.worker == self._chief_worker_name()
        self.writes = (self.include_workers == "all" or self.chief) and not self.dry_run
        self._training_state = None if self.dry_run else TrainingState.for_this_job()
        if self._training_state is not None:
            self._resume_counters(self._training_state)
        if not self.dry_run:
            self._check_out_dir()
        shutdown.track(self)  # (closed at exit or on SIGTERM if the script does not close it)
        from smdebug_lite.hooks.singleton import set_hook

        set_hook(self)  # as in smdebug, the newest hook is the process's current one

    # -- from SageMaker's DebugHookConfig ------------------------------------------------------

    @classmethod
    def create_from_json_file(cls: type[_H], json_file_path: str | None = None) -> _H:
        """The hook SageMaker's DebugHookConfig JSON describes (`json_file_path`, else
        $SMDEBUG_CONFIG_FILE_PATH, else /opt/ml/input/config/debughookconfig.json).
        Raises FileNotFoundError when there is none and HookConfigError when it is unusable."""
        settings = parse_hook_config(json_file_path, default_values=cls._json_default_values())
        hook = cls(**cls._json_hook_kwargs(settings.hook_kwargs()))
        settings.apply_to(hook.collection_manager)
        hook._collections_configured()
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

    def _collections_configured(self) -> None:
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
        if self._writer is not None:
            return
        self.worker = self._worker_name()
        self.num_workers = self._num_workers()
        self.chief = self.worker == self._chief_worker_name()
        self.writes = ((self.include_workers == "all" or self.chief) and not self.dry_run
                       and not self._storage_refused)

    # -- configuration -------------------------------------------------------------------------

    def get_collection(self, name: str, create: bool = True) -> Collection:
        regexes = self._extension_collections.get(name)
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
        storage = open_storage(self.out_dir)
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
        self._storage_refused = True
        self.disabled = True
        self.writes = False
        logger.error(
            "smdebug-lite cannot use the out_dir %s (S3: %s: %s). The hook is disabled for this "
            "run and training continues without saving tensors; check the bucket, the endpoint "
            "and the permissions of the job's credentials.", self.out_dir, code, message[:400])

    def _prepare_collections(self) -> None:
        """Give every collection complete save and reduction configs (inherited from the hook)."""
        self._quiet_left = 0
        # Included names the manager does not know yet (custom collections) are created first,
        # so that they get configs like every other collection.
        explicit = [self._included_collection(n) for n in self.include_collections]
        self._explicit_ids = frozenset(map(id, explicit))
        self._included = list(explicit)
        if self.save_all:
            # As in smdebug, save_all includes every collection: each one learns the names of
            # the tensors it matches (the collections file lists them) and adds its own
            # settings to theirs. Only the explicitly included ones are reported as unmatched.
            self._included += [c for c in self.collection_manager.collections.values()
                               if id(c) not in self._explicit_ids]
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
        self._match_cache.clear()
        self._quiet.clear()
        self._schedules.clear()
        self._plan_caches.clear()
        self._plan_cache = self._plan_caches[self._plan_key] = {}
        self._prepared = True

    def _included_collection(self, name: str) -> Collection:
        """The included collection `name`, created if needed; an extension built-in created
        empty elsewhere (a DebugHookConfig entry without a regex) gets its regex."""
        coll = self.get_collection(name)
        regexes = self._extension_collections.get(name)
        if regexes is not None and not coll.include_regex and not coll.tensor_names:
            coll.include(regexes)
        return coll

    # -- steps ---------------------------------------------------------------------------------

    def set_mode(self, mode) -> None:
        mode = parse_mode(mode)
        if mode is not self.mode:  # (loops that set the mode at every step keep the countdown)
            self._quiet_left = 0
        self.mode = mode
        self.mode_steps.setdefault(mode, -1)

    @property
    def mode_step(self) -> int:
        return self.mode_steps.get(self.mode, -1)

    def _resume_counters(self, state: TrainingState) -> None:
        """A restarted job (spot training) continues the step numbers of the run before."""
        counters = state.resume_counters()
        if counters is None:
            return
        self.step, mode_steps, self.last_saved_step = counters
        self.mode_steps.update(mode_steps)
        self.mode_steps[ModeKeys.GLOBAL] = self.step
        logger.info("smdebug-lite: resuming step counters from %s: the next step is %d",
                    state.path, self.step + 1)

    def start_step(self) -> None:
        """A new step of the current mode begins: count it, decide what this step saves."""
        self.end_step()
        if self._training_state is not None and self.chief:
            self._training_state.maybe_record(self.step, self.mode_steps, self.last_saved_step)
        self.step += 1
        self.mode_steps[self.mode] = self.mode_steps.get(self.mode, -1) + 1
        if self.mode != ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = self.step
        self._begin()

    def _quiet_steps_ahead(self) -> int:
        """How many of the next steps can start without any of the work of `start_step`: none
        of them saves (the mode's quiet window, see `_select_saving`, covers them) and nothing
        of this step will be pending. Adapters call it once a step has fully started and count
        steps down with `_quiet_left`; anything that could change the answer (a mode, a
        scalar, a schedule, a collection) sets `_quiet_left` to 0 or moves the generation."""
        if (self._step_writer is not None or self._saving or self._before_first_step
                or self._training_state is not None or self.disabled or self._closed):
            return 0
        mode = self.mode
        mode_step = self.mode_steps.get(mode, -1)
        quiet = self._quiet.get(mode)
        generation = GENERATION[0]
        if quiet is None or quiet[0] != generation or not quiet[1] <= mode_step < quiet[2]:
            return 0
        self._quiet_gen = generation
        return _FOREVER if quiet[2] == math.inf else int(quiet[2]) - mode_step - 1

    def set_step(self, step: int, mode=None) -> None:
        """Frameworks that know their own step (XGBoost iterations) set it directly."""
        self._quiet_left = 0
        self.end_step()
        if mode is not None:
            self.set_mode(mode)
        self.step = int(step)
        self.mode_steps[self.mode] = int(step)
        if self.mode != ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = self.step
        self._begin()

    def _begin(self) -> None:
        if not self._prepared:
            self._refresh_worker_identity()
            self._prepare_collections()
        mode = self.mode
        mode_step = self.mode_steps.get(mode, -1)
        if not self._before_first_step and self._quiet_covers(mode, mode_step):
            if self._saving:  # the step before saved; this one is the first quiet step
                self._saving = []
                self._set_saving_ids()
            return  # nothing saves this step
        self._select_saving(mode, mode_step)
        if self._saving and self.writes:
            self._step_writer = StepWriter(self.step, self.worker, mode, mode_step)
            if self._tb is None and self.tensorboard_dir:
                self._tb = self._make_tb_writer()
        pending, self._before_first_step = self._before_first_step, []
        for replay in pending:
            replay()

    def _quiet_covers(self, mode: ModeKeys, mode_step: int) -> bool:
        """Whether `mode_step` lies in the mode's quiet window (see `_select_saving`): no included
        collection saves it, and no schedule changed since that was worked out."""
        quiet = self._quiet.get(mode)
        return (quiet is not None and quiet[1] < mode_step < quiet[2]
                and quiet[0] == GENERATION[0])

    def _schedule(self, mode: ModeKeys) -> tuple[list[SaveConfigMode], list[tuple[Collection, int]]]:
        """The distinct schedules of the included collections that can save in `mode`
        (gradients never in EVAL/PREDICT), and each such collection with the index of its
        schedule; kept until a schedule or the collections change. Collections usually share
        one schedule (copies of the hook's), which is then asked once per step, not once per
        collection."""
        generation = GENERATION[0]
        cached = self._schedules.get(mode)
        if cached is not None and cached[0] == generation:
            return cached[1]
        no_grads = mode is ModeKeys.EVAL or mode is ModeKeys.PREDICT
        schedules: list[SaveConfigMode] = []
        index: dict[tuple, int] = {}
        members: list[tuple[Collection, int]] = []
        for c in self._included:
            if no_grads and c.name in EVAL_PREDICT_SKIPPED_COLLECTIONS:
                continue
            cfg = c.save_config.get_save_config(mode)
            key = (cfg.save_interval, cfg.start_step, cfg.end_step, tuple(cfg.save_steps))
            if key not in index:
                index[key] = len(schedules)
                schedules.append(cfg)
            members.append((c, index[key]))
        self._schedules[mode] = (generation, (schedules, members))
        return schedules, members

    def _select_saving(self, mode: ModeKeys, mode_step: int) -> None:
        """The included collections that save this step."""
        schedules, members = self._schedule(mode)
        due = [cfg.should_save_step(mode_step) for cfg in schedules]
        saving = [c for c, i in members if due[i]] if any(due) else []
        if saving or self._saving:  # most steps save nothing, like the step before
            self._saving = saving
            self._set_saving_ids()
        # Until the next step at which an included collection saves, `_begin` skips this check
        # (the step after a saving step included).
        following = math.inf
        for cfg in schedules:
            n = cfg.next_save_step(mode_step + 1)
            if n is not None and n < following:
                following = n
        self._quiet[mode] = (GENERATION[0], mode_step, following)

    def _set_saving_ids(self) -> None:
        ids = frozenset(map(id, self._saving))
        if ids != self._plan_key:
            self._plan_key = ids
            cache = self._plan_caches.get(ids)
            if cache is None:
                if len(self._plan_caches) >= 64:
                    self._plan_caches.clear()
                cache = self._plan_caches[ids] = {}
            self._plan_cache = cache
        self._saving_ids = ids

    @property
    def saving_this_step(self) -> bool:
        return bool(self._saving)

    def end_step(self) -> None:
        """Hand the current step to the writer (its files appear once written)."""
        sw = self._step_writer
        self._step_writer = None
        if sw is None or self.disabled:
            return
        if len(sw):
            template = self._writer_for_step().submit(sw)
            if sw.on_submitted is not None:
                sw.on_submitted(template)
            self.last_saved_step = sw.step
            self._maybe_export_collections()
            self._report_unmatched(first_only=True)
        if self._tb is not None:
            self._tb.flush_step()

    # -- what to save --------------------------------------------------------------------------

    def _matching(self, name: str) -> list[Collection]:
        found = self._match_cache.get(name)
        if found is None:
            found = [c for c in self._included if c.matches(name)]
            self._match_cache[name] = found
        return found

    def plan(self, name: str) -> TensorPlan | None:
        """What to save for `name` at this step, or None (cheap when nothing is saved)."""
        if not self._saving or self.disabled:
            return None
        try:
            return self._plan_cache[name]
        except KeyError:
            pass
        plan = self._build_plan(name)
        self._plan_cache[name] = plan
        return plan

    def _build_plan(self, name: str) -> TensorPlan | None:
        return self._plan_for(name, [c for c in self._matching(name) if id(c) in self._saving_ids])

    def _plan_for(self, name: str, colls: list[Collection]) -> TensorPlan | None:
        """The plan that saving `name` in `colls` makes (they learn the name); None if empty."""
        if not colls:
            return None
        plan = TensorPlan(name, collections=colls)
        seen: set[tuple[str, bool]] = set()
        for c in colls:
            c.add_tensor_name(name)
            self._matched.add(c.name)
            rc = c.reduction_config
            plan.save_raw |= rc.save_raw_tensor
            plan.save_shape |= rc.save_shape
            if c.name in SM_METRIC_COLLECTIONS:
                plan.sm_metric = True
            if c.name in SCALAR_COLLECTIONS:
                plan.tb_scalar = True
            elif c.save_histogram and c.name not in NON_HISTOGRAM_COLLECTIONS:
                plan.histogram = True
            if c.name in NON_REDUCTION_COLLECTIONS:
                continue
            for pair in rc.iter_reductions():
                if pair not in seen:
                    seen.add(pair)
                    plan.reductions.append(pair)
        return plan

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
        sw = self._step_writer
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
        if plan.sm_metric and raw is not None and self._sm_metrics is not None and raw.size:
            # smdebug sent the mean of every losses/metrics/sm_metrics value it saved.
            self._sm_metrics.log(f"{plan.name}_{sw.mode.name}", raw, wall_time, sw.mode_step)
        if self._tb is not None and raw is not None:
            self._tb_record(plan, raw, sw.step, sw.mode)

    def write_step(self, items: list[tuple[TensorPlan, np.ndarray | None, dict | None, tuple]],
                   wall_time: float) -> None:
        """`write` for every (plan, raw, reductions, shape) an adapter captured in a step. A
        step of raw tensors only (the usual case) goes into the step writer in one piece."""
        sw = self._step_writer
        if sw is not None and self._tb is None and self._sm_metrics is None and not self.dry_run:
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
            if sm_metric and self._sm_metrics is not None:
                self._sm_metrics.log(f"{tag}_{self.mode.name}", arr, wall, max(self.mode_step, 0))
            if self.step < 0:
                self._before_first_step.append(
                    lambda: self._scalar_writer().add_tensor(tag, arr, wall))
                return
            if self.writes:
                self._scalar_writer().add_tensor(tag, arr, wall)
            if self._tb is not None:
                self._tb.add_scalar(tag, float(np.asarray(arr).reshape(-1)[0]), self.step, self.mode)

    def _scalar_writer(self) -> StepWriter:
        self._quiet_left = 0  # the step now has something to hand over when it ends
        if self._step_writer is None:
            self._step_writer = StepWriter(max(self.step, 0), self.worker, self.mode, max(self.mode_step, 0))
        return self._step_writer

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
                self._before_first_step.append(lambda: self._save_tensor_now(tensor_name, arr))
                return
            if changed:
                self._begin_saving_recheck()
            self._save_tensor_now(tensor_name, arr)

    def _save_tensor_now(self, tensor_name: str, arr: np.ndarray) -> None:
        plan = self.plan(tensor_name)
        if plan is not None:
            self.write(plan, raw=arr, reductions=self._numpy_reductions(plan, arr), shape=arr.shape)

    def _begin_saving_recheck(self) -> None:
        self._quiet_left = 0
        mode, mode_step = self.mode, self.mode_step
        self._select_saving(mode, mode_step)
        if self._saving and self.writes and self._step_writer is None and self.step >= 0:
            self._step_writer = StepWriter(self.step, self.worker, mode, mode_step)

    def _to_numpy(self, value) -> np.ndarray:
        """Adapters override to convert framework tensors (copying: values may change later)."""
        return np.array(to_numpy_value(value), copy=True)

    @staticmethod
    def _numpy_reductions(plan: TensorPlan, arr: np.ndarray) -> dict[tuple[str, bool], np.ndarray]:
        from smdebug_lite.hooks.numpy_reductions import compute

        return {pair: compute(arr, *pair) for pair in plan.reductions}

    # -- writer, collections file, TensorBoard ---------------------------------------------------

    def _writer_for_step(self) -> TrialWriter | ProcessTrialWriter:
        if self._writer is None:
            try:
                claimed = self._claim_out_dir()
                if claimed:
                    self._writer = open_trial_writer(self.out_dir, self.worker)
            except OSError as e:  # (a full disk, a read-only or missing mount)
                raise WriteFailed(f"writing to {self.out_dir} failed: {type(e).__name__}: {e}") from e
            if not claimed:
                self.writes = False
                raise _SilentDisable()
        return self._writer

    def _claim_out_dir(self) -> bool:
        """Several processes that each believe they are the only worker must not interleave
        files: the first to create claim.smd writes; a claim left by a dead process is taken over."""
        if self.num_workers > 1 or is_s3_path(self.out_dir):
            return True
        os.makedirs(self.out_dir, exist_ok=True)
        path = os.path.join(self.out_dir, CLAIM_FILE)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                try:
                    with os.fdopen(fd, "w") as f:
                        f.write(str(os.getpid()))
                except OSError:
                    os.unlink(path)  # (an empty claim would read as a dead owner's anyway)
                    raise
                self._claimed = True
                return True
            except FileExistsError:
                try:
                    owner = int(open(path).read().strip() or "0")
                except (OSError, ValueError):
                    owner = 0
                if owner == os.getpid():
                    return True
                if owner and _pid_alive(owner):
                    logger.warning("Another process (pid %d) is writing to %s; this process will "
                                   "not save tensors there", owner, self.out_dir)
                    return False
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        return False

    def _collections_json(self) -> str:
        n = self.num_workers if self.include_workers == "all" else 1
        return self.collection_manager.export(None, num_workers=n)

    def _maybe_export_collections(self) -> None:
        """Write the collections file after the first saved step, and again whenever collections
        learned new tensor names (smdebug wrote it once, so later tensors were missing)."""
        version = tensor_names_version()
        if version != self._exported_version and self._writer is not None:
            self._exported_version = version
            self._writer.write_collections(self._collections_json())

    def _make_tb_writer(self):
        from smdebug_lite.writer.tensorboard import TensorBoardWriter

        return TensorBoardWriter(self.tensorboard_dir)

    def _tb_record(self, plan: TensorPlan, raw: np.ndarray, step: int | None = None,
                   mode: ModeKeys | None = None) -> None:
        """TensorBoard gets the step and mode of the step the tensor belongs to (a write may be
        deferred to the end of its step, after set_mode)."""
        step = self.step if step is None else step
        mode = self.mode if mode is None else mode
        if raw.dtype in LOW_PRECISION_FLOATS:  # bfloat16/float8 (numpy kind "V")
            raw = raw.astype(np.float32)
        if plan.tb_scalar and raw.size == 1 and raw.dtype.kind in "biuf":
            self._tb.add_scalar(plan.name, float(raw.reshape(-1)[0]), step, mode)
        elif plan.histogram and raw.size and raw.dtype.kind in "iuf":
            explicit = self._explicit_ids
            for c in plan.collections:
                if (c.save_histogram and c.name not in NON_HISTOGRAM_COLLECTIONS
                        and id(c) in explicit):
                    self._tb.add_histogram(f"{c.name}/{plan.name}", raw, step, mode)

    def _report_unmatched(self, first_only: bool) -> None:
        if first_only and self._saving_ids in self._all_matched:
            return  # every one of these collections has matched (or been reported) already
        unsettled = False
        explicit = self._explicit_ids
        for c in self._saving:
            if (c.name in self._matched or c.name in self._warned_unmatched or c.tensor_names
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
            self._all_matched.add(self._saving_ids)

    def _unmatched_hint(self, coll: Collection) -> str:
        """What to check when `coll` saved nothing (a framework knows likelier causes)."""
        return "check its include_regex or tensor names"

    # -- rule feedback ------------------------------------------------------------------------

    def stop_requested(self) -> bool:
        """True once a rule's local stop-signal action fired for this out_dir.

        Training loops that want rules to stop them check this (it is rate-limited, so it is
        cheap to call every step): ``if hook.stop_requested(): break``.
        """
        poller = getattr(self, "_stop_poller", None)
        if poller is None:
            from smdebug_lite.rules.actions.stop_signal import StopSignalPoller

            poller = self._stop_poller = StopSignalPoller(self.out_dir)
        try:
            return poller.should_stop()
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
        except _SilentDisable:
            self.disabled = True
            self._quiet_left = 0
        except Exception as e:
            self.disable(where, e)

    def disable(self, where: str, error: BaseException) -> None:
        if self.disabled:
            return
        self.disabled = True
        self._quiet_left = 0
        self._step_writer = None
        if isinstance(error, WriteFailed):
            # Not a fault of the hook (a full disk, S3 refusing writes): no traceback, and
            # `close` does not report it again.
            self._write_failure_reported = True
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

    def close(self) -> None:
        """Write the last step, the collections file and the end marker; wait for uploads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._quiet_left = 0
        try:
            if not self.disabled:
                with self.failsafe("close"):
                    self.end_step()
                    self._report_unmatched(first_only=False)
                    if self._training_state is not None and self.chief:
                        # A checkpoint written after the last step is recorded too.
                        self._training_state.maybe_record(self.step, self.mode_steps,
                                                          self.last_saved_step, now=True)
            # Even a hook that disabled itself ends the run cleanly on disk (collections file,
            # end marker): readers waiting for data learn that training is over instead of
            # waiting out their timeout, and what was saved before the failure stays readable.
            if self.writes:
                try:
                    writer = self._writer_for_step()
                    self._exported_version = -1
                    self._maybe_export_collections()
                    writer.close()
                except _SilentDisable:
                    pass
                except Exception as e:
                    if not (isinstance(e, WriteFailed) and self._write_failure_reported):
                        logger.error("smdebug-lite could not finish writing %s: %s", self.out_dir, e)
                self._mark_training_end()
            if self._tb is not None:
                self._tb.close()
            if self._sm_metrics is not None:
                self._sm_metrics.close()
        finally:
            if self._claimed:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.out_dir, CLAIM_FILE))
            shutdown.forget(self)

    def _mark_training_end(self) -> None:
        """Write the end marker unless the writer did. After a failed writer (a full disk, S3
        refusing writes) it did not, yet readers must learn that no step is coming any more: a
        zero-byte file, written straight to storage (it needs no free block on a full disk).
        Not on SageMaker, where the platform writes it."""
        if not self.writes or on_sagemaker():
            return
        try:
            storage = open_storage(self.out_dir)
            if not storage.exists(END_OF_JOB_FILE):
                storage.write_atomic(END_OF_JOB_FILE, b"")
        except Exception as e:
            logger.error("smdebug-lite could not write %s in %s: %s: %s", END_OF_JOB_FILE,
                         self.out_dir, type(e).__name__, e)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _SilentDisable(Exception):
    """Another process owns the out_dir: stop saving without an error report."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


__all__ = ["HookCore", "TensorPlan", "reduction_tensor_name", "to_numpy_value"]
