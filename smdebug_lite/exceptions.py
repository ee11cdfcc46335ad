"""Exceptions with smdebug's names, hierarchy and messages, so user code catching them still works."""

from __future__ import annotations

from smdebug_lite.modes import ModeKeys


class SMDebugError(Exception):
    """Base of every smdebug exception."""


class SMDebugCustomerError(SMDebugError):
    pass


class SMDebugTypeError(SMDebugError, TypeError):
    pass


class SMDebugRuntimeError(SMDebugError, RuntimeError):
    pass


class SMDebugNotImplementedError(SMDebugError, NotImplementedError):
    pass


class SMDebugValueError(SMDebugError, ValueError):
    pass


class TensorNotReducible(SMDebugValueError, SMDebugTypeError):
    """A reduction asked of a tensor whose dtype has none (strings, bytes, objects).

    smdebug let numpy's TypeError (or ValueError) through; this is both, so ``except TypeError``
    written for smdebug and ``except SMDebugValueError`` both catch it.
    """

    def __init__(self, tname: str | None, reduction: str, dtype: object, abs: bool = False) -> None:
        super().__init__(tname, reduction, dtype, abs)
        self.tname, self.reduction, self.dtype, self.abs = tname, reduction, dtype, abs

    def __str__(self) -> str:
        what = f"abs_{self.reduction}" if self.abs else self.reduction
        tensor = f"tensor {self.tname!r}" if self.tname else "a tensor"
        return (
            f"Reduction {what!r} of {tensor} is not defined for its dtype {self.dtype}; "
            "reductions need numeric or boolean values"
        )


def _mode_name(mode: object) -> str:
    return mode.name if isinstance(mode, ModeKeys) else str(mode)


class InvalidCollectionConfiguration(SMDebugError):
    def __init__(self, c_name: str) -> None:
        super().__init__(c_name)
        self.c_name = c_name

    def __str__(self) -> str:
        return (
            f"Collection {self.c_name} has not been configured. Please configure it with "
            "tensor_names or include_regex."
        )


class StepNotYetAvailable(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys) -> None:
        super().__init__(step, mode)
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return f"Step {self.step} of mode {_mode_name(self.mode)} not yet available"


class MissingCollectionFiles(SMDebugError):
    def __init__(self, message: str | None = None) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        base = "Training job has ended. All the collection files could not be loaded"
        return f"{base}: {self.message}" if self.message else base


class IndexReaderException(SMDebugError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TensorCorrupted(SMDebugError):
    """A stored tensor record failed its integrity check (not in smdebug: it never checked)."""

    def __init__(self, path: str, step: int, tname: str, reason: str) -> None:
        super().__init__(path, step, tname, reason)
        self.path, self.step, self.tname, self.reason = path, step, tname, reason

    def __str__(self) -> str:
        return f"Tensor {self.tname} at step {self.step} in {self.path} is corrupted: {self.reason}"


class StepUnavailable(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys) -> None:
        super().__init__(step, mode)
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return f"Step {self.step} of mode {_mode_name(self.mode)} is not available as it was not saved"


class TensorUnavailableForStep(SMDebugError):
    def __init__(
        self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL, has_reductions: bool = False
    ) -> None:
        super().__init__(tname, step, mode, has_reductions)
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions

    def __str__(self) -> str:
        msg = (
            f"Value for tensor {self.tname} is not available for step {self.step} "
            f"with mode {_mode_name(self.mode)} as it was not saved."
        )
        if self.has_reductions:
            msg += (
                "This tensor has reductions saved for this step. "
                "You might want to query for the reductions."
            )
        return msg


class ShapeUnavailableForStep(SMDebugError):
    def __init__(self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        super().__init__(tname, step, mode)
        self.tname = tname
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return (
            f"Shape for tensor {self.tname} is not available for step {self.step} "
            f"with mode {_mode_name(self.mode)} as it was not saved."
        )


class TensorUnavailable(SMDebugError):
    def __init__(self, tname: str) -> None:
        super().__init__(tname)
        self.tname = tname

    def __str__(self) -> str:
        return f"Tensor {self.tname} was not saved."


class InvalidWorker(SMDebugError):
    def __init__(self, worker: str) -> None:
        super().__init__(worker)
        self.worker = worker

    def __str__(self) -> str:
        return f"Invalid Worker: {self.worker}"


class NoMoreProfilerData(SMDebugError):
    def __init__(self, timestamp: object) -> None:
        super().__init__(timestamp)
        self.timestamp = timestamp

    def __str__(self) -> str:
        return f"Looking for timestamp {self.timestamp} and reached end of training."


class NoMoreData(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys, last_step: int) -> None:
        super().__init__(step, mode, last_step)
        self.step = step
        self.mode = mode
        self.last_step = last_step

    def __str__(self) -> str:
        return (
            f"Looking for step {self.step} of mode {_mode_name(self.mode)} and reached end of "
            f"training. Max step available is {self.last_step}"
        )


class RuleEvaluationConditionMet(SMDebugError):
    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        super().__init__(rule_name, step, end_of_rule)
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule

    def __str__(self) -> str:
        return (
            f"Evaluation of the rule {self.rule_name} at step {self.step} resulted in the "
            "condition being met"
        )


class InsufficientInformationForRuleInvocation(SMDebugError):
    def __init__(self, rule_name: str, message: str) -> None:
        super().__init__(rule_name, message)
        self.rule_name = rule_name
        self.message = message

    def __str__(self) -> str:
        return f"Insufficient information to invoke rule {self.rule_name}: {self.message}"


class TrialDataTimeout(SMDebugError, TimeoutError):
    """Waited the configured time for data that never came (smdebug waited forever instead)."""

    def __init__(self, path: str, waited_s: float, what: str) -> None:
        super().__init__(path, waited_s, what)
        self.path, self.waited_s, self.what = path, waited_s, what

    def __str__(self) -> str:
        return (
            f"No {self.what} appeared under {self.path} after waiting {self.waited_s:.0f}s; "
            "check the path, or raise the timeout (create_trial(..., timeout=...) or env "
            "SMDEBUG_TRIAL_TIMEOUT) if training is still starting"
        )


class TrialFileDamaged(IndexReaderException):
    """A file of a trial that cannot be used as it is (not in smdebug, which raised whatever the
    parser or a dict lookup raised, or reported the step as not saved).

    An `IndexReaderException`, so code written for smdebug's index reader still catches it.
    """

    kind = "File"

    def __init__(self, path: str, reason: str, step: int | None = None,
                 worker: str | None = None) -> None:
        self.path, self.reason, self.step, self.worker = path, reason, step, worker
        super().__init__(self._text())
        self.args = (path, reason, step, worker)

    def _text(self) -> str:
        where = "" if self.step is None else f" (step {self.step}"
        if where and self.worker:
            where += f", {self.worker}"
        return f"{self.kind} {self.path}{where + ')' if where else ''} is damaged: {self.reason}"

    def __str__(self) -> str:
        return self._text()


class IndexFileCorrupted(TrialFileDamaged):
    """An index file that is empty, truncated, not JSON, too deep or too large, or whose entries
    lack keys or hold impossible offsets. Only its step is affected."""

    kind = "Index file"


class EventFileMissing(TensorCorrupted):
    """The event file an index file points to is not there (and can no longer appear)."""

    def __init__(self, path: str, step: int, tname: str, index_path: str = "") -> None:
        super().__init__(path, step, tname, "the event file is missing")
        self.index_path = index_path
        self.args = (path, step, tname, index_path)

    def __str__(self) -> str:
        listed = f" by {self.index_path}" if self.index_path else " in its index file"
        return (f"Event file {self.path} of step {self.step} is missing, though it is listed"
                f"{listed} (reading tensor {self.tname})")


class JSONFileRejected(SMDebugValueError):
    """A JSON file refused before or while parsing: too large, nested too deeply, or invalid."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class TrialStorageError(SMDebugRuntimeError):
    """Storage refused a trial's reads for good: a missing bucket, denied access, or failures
    that outlasted the retries. Names the URI, never credentials."""

    def __init__(self, uri: str, reason: str, code: str | None = None) -> None:
        super().__init__(uri, reason, code)
        self.uri, self.reason, self.code = uri, reason, code

    def __str__(self) -> str:
        return f"Cannot read {self.uri}: {self.reason}"


class CollectionsFileDamaged(TrialFileDamaged, SMDebugValueError):
    """A collections file that is not JSON, too large or too deep, or not a collections
    document. Also an SMDebugValueError, as a bad collections file was before."""

    kind = "Collections file"


class NonFiniteRecordDamaged(TrialFileDamaged):
    """A non-finite record (`non_finite/<worker>.json`) that is not JSON, too large, or not a
    record: a field missing, of the wrong type or out of range, named in the reason."""

    kind = "Non-finite record"
