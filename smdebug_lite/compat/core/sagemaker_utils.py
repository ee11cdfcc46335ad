"""``smdebug.core.sagemaker_utils``: whether this process runs as a SageMaker training job."""

from __future__ import annotations

from smdebug_lite.config.hook_json import is_sagemaker_job

__all__ = ["is_sagemaker_job"]
