"""``smdebug.core.s3_utils``: listing S3 keys from a position, as smdebug's index reader did."""

from __future__ import annotations

from smdebug_lite.compat.core.access_layer.s3handler import ListRequest, S3Handler


def _list_s3_prefixes(list_info: list[ListRequest]) -> list:
    """One request: its keys; several: a list of key lists."""
    files = S3Handler.list_prefixes(list_info)
    if len(files) == 1:
        files = files[0]
    return files


def list_s3_objects(
    bucket: str, prefix: str, start_after_key: str | None = None, delimiter: str = ""
) -> tuple[list[str], str | None]:
    """(keys under `prefix` after `start_after_key`, the last key listed or None when none).

    Feed the returned token back as `start_after_key` to list only what appeared since."""
    if start_after_key is None:
        start_after_key = prefix
    request = ListRequest(
        Bucket=bucket, Prefix=prefix, StartAfter=start_after_key, Delimiter=delimiter
    )
    objects = _list_s3_prefixes([request])
    return objects, (objects[-1] if objects else None)
