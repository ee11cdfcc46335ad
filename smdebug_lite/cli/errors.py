"""Exit codes and the one place library exceptions become a message and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

EXIT_OK = 0
EXIT_ISSUES_FOUND = 1  # rules: a condition was met (as the rule container)
EXIT_ERROR = 2  # bad arguments, or a rule ended in Error (as the rule container)
EXIT_NO_TRIAL = 3  # no trial there, or no data appeared in time
EXIT_UNKNOWN_NAME = 4  # unknown tensor or collection
EXIT_BAD_STEP = 5  # a step or mode with nothing saved for what was asked
EXIT_UNREADABLE = 6  # damaged, missing or unreadable files
EXIT_MISSING_FEATURE = 7  # an optional package or feature is not installed
EXIT_OUTPUT_EXISTS = 8  # the output path exists


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int) -> NoReturn:
    raise CliError(message, code)


def _code_for(e: BaseException) -> int | None:
    from smdebug_lite import exceptions as ex
    from smdebug_lite.table.optional import MissingOptionalDependency

    table: list[tuple[type[BaseException] | tuple[type[BaseException], ...], int]] = [
        (ex.TensorUnavailable, EXIT_UNKNOWN_NAME),
        ((ex.StepUnavailable, ex.TensorUnavailableForStep, ex.NoMoreData,
          ex.StepNotYetAvailable, ex.ShapeUnavailableForStep, ex.InvalidWorker), EXIT_BAD_STEP),
        ((ex.MissingCollectionFiles, ex.TrialDataTimeout), EXIT_NO_TRIAL),
        ((ex.TrialFileDamaged, ex.TensorCorrupted, ex.IndexReaderException,
          ex.TrialStorageError), EXIT_UNREADABLE),
        (MissingOptionalDependency, EXIT_MISSING_FEATURE),
        ((FileExistsError, IsADirectoryError), EXIT_OUTPUT_EXISTS),
        ((ex.SMDebugValueError, ex.SMDebugTypeError, ValueError), EXIT_ERROR),
        (OSError, EXIT_UNREADABLE),
    ]
    for kinds, code in table:
        if isinstance(e, kinds):
            return code
    return None


@contextmanager
def handled() -> Iterator[None]:
    """Turn known failures into `error: <message>` on stderr and their exit code."""
    try:
        yield
    except CliError as e:
        sys.stderr.write(f"error: {e}\n")
        raise typer.Exit(e.code) from None
    except Exception as e:
        code = _code_for(e)
        if code is None:
            raise
        sys.stderr.write(f"error: {type(e).__name__}: {e}\n")
        raise typer.Exit(code) from None
