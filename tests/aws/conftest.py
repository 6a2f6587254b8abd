"""One local moto server per module: S3 for the store, Batch (containers disabled) for jobs."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from swemill.store import Store
from swemill_testkit.store import LocalS3, local_s3


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with local_s3() as server:
        yield server


@pytest.fixture
def s3_store(s3: LocalS3, request: pytest.FixtureRequest) -> Store:
    return Store(s3.root(request.node.name.replace("[", "-").rstrip("]")),
                 storage_options=s3.storage_options)


def boto(s3: LocalS3, service: str) -> Any:
    import boto3

    env = s3.env()
    return boto3.client(service, endpoint_url=s3.endpoint_url, region_name="us-east-1",
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])


def moto_config(s3: LocalS3, config: dict[str, Any]) -> None:
    """Set moto's server-side options (its documented ``/moto-api/config`` endpoint)."""
    req = urllib.request.Request(f"{s3.endpoint_url}/moto-api/config", method="POST",
                                 data=json.dumps(config).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as reply:
        assert reply.status in (200, 201)


def batch_queue(s3: LocalS3, name: str) -> Any:
    """moto's Batch (containers disabled) with a job queue ``name`` and a job definition
    ``name-worker``; returns the Batch client. The Spot environment itself lives in
    infra/swemill.yaml: moto only needs one to exist."""
    moto_config(s3, {"batch": {"use_docker": False}})
    client, iam = boto(s3, "batch"), boto(s3, "iam")
    role = iam.create_role(RoleName=f"{name}-service",
                           AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    env = client.create_compute_environment(
        computeEnvironmentName=f"{name}-spot", type="UNMANAGED", state="ENABLED",
        serviceRole=role)
    order = [{"order": 1, "computeEnvironment": env["computeEnvironmentArn"]}]
    client.create_job_queue(jobQueueName=name, state="ENABLED", priority=1,
                            computeEnvironmentOrder=order)
    client.register_job_definition(jobDefinitionName=f"{name}-worker", type="container",
                                   containerProperties={"image": "swemill-worker", "vcpus": 1,
                                                        "memory": 2048})
    return client
