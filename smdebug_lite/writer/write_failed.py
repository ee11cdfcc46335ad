"""The one error every writer raises when its files cannot be written."""

from __future__ import annotations


class WriteFailed(RuntimeError):
    """Writing an out_dir failed (a full disk, a lost writer process, an S3 error): not a fault
    of the hook, which stops saving and says so in one line; the cause is in the message."""


__all__ = ["WriteFailed"]
