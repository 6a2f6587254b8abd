"""A local S3-compatible server for tests and demos: moto's server on loopback only.

    with local_s3() as s3:
        store = Store(s3.root("prefix"), storage_options=s3.storage_options)

It binds 127.0.0.1 on a free port, creates a bucket and sets nothing in the environment;
callers that need ``AWS_*`` variables (a subprocess, the CLI) use :meth:`LocalS3.env`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from typing import Any, NamedTuple

from swemill.core.errors import MissingDependency

__all__ = ["LocalS3", "local_s3"]

_KEY = "swemill-test"
_SECRET = "swemill-test-secret"
_REGION = "us-east-1"


class LocalS3(NamedTuple):
    endpoint_url: str
    bucket: str

    def root(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    @property
    def storage_options(self) -> dict[str, Any]:
        """What ``Store(..., storage_options=...)`` (and s3fs) need to reach this server."""
        return {
            "key": _KEY,
            "secret": _SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": _REGION},
        }

    def env(self) -> dict[str, str]:
        """Environment variables for a child process (``swemill build --out s3://...``)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": _KEY,
            "AWS_SECRET_ACCESS_KEY": _SECRET,
            "AWS_DEFAULT_REGION": _REGION,
        }


@contextlib.contextmanager
def local_s3(bucket: str | None = None) -> Iterator[LocalS3]:
    """Start moto's threaded server on 127.0.0.1, create a bucket, yield, then stop."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        raise MissingDependency(
            f"a local S3 server needs moto[server] and boto3 ({exc.name} is missing)"
        ) from exc
    # The server logs every request through werkzeug; tests and demos want quiet.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = LocalS3(f"http://{host}:{port}", bucket or f"swemill-{secrets.token_hex(4)}")
        client = boto3.client(
            "s3",
            endpoint_url=s3.endpoint_url,
            aws_access_key_id=_KEY,
            aws_secret_access_key=_SECRET,
            region_name=_REGION,
        )
        client.create_bucket(Bucket=s3.bucket)
        yield s3
    finally:
        server.stop()
