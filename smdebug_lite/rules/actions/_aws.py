"""boto3 clients for rule actions: region from AWS_REGION (us-east-1 when unset), short timeouts.

boto3 itself honours AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>, which is how tests point
the actions at a local moto server.
"""

from __future__ import annotations

import os
from typing import Any


def action_region() -> str:
    return (os.environ.get("AWS_REGION") or "").strip() or "us-east-1"


def aws_client(service: str) -> Any:
    """A client that gives up quickly: a rule must not hang on an unreachable endpoint."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=10, read_timeout=30,
                    retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client(service, region_name=action_region(), config=config)
