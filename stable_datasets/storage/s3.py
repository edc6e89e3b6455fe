"""S3 and S3-compatible stores (MinIO, Ceph, R2, moto) through boto3.

Credentials and endpoint come from the usual AWS places (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE and ~/.aws, AWS_ENDPOINT_URL,
AWS_REGION) unless `storage_options` names them (s3fs's spelling: `key`, `secret`, `token`,
`endpoint_url`, `region`, `profile`). boto3 is used directly because publishing needs
`put_object(IfNoneMatch="*")`. boto3's own retries are off: storage.retry retries, so an
unreachable endpoint fails after a bounded, short wait.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from loguru import logger

from stable_datasets.errors import ConfigurationError, MissingObjectError, StorageError
from stable_datasets.storage.retry import max_attempts, with_retries
from stable_datasets.storage.store import (
    CHUNK,
    LocalWriteError,
    ObjectChangedError,
    ObjectInfo,
    ObjectStore,
    local_writes,
    save_stream,
)

T = TypeVar("T")
#: objects bigger than this are downloaded in ranges of this size, PART_THREADS at a time (else one GET)
PART_BYTES = 64 << 20
PART_THREADS = 8
#: files bigger than this are uploaded in parts of this size (multipart; one PUT takes at most 5 GB on S3)
UPLOAD_PART_BYTES = 256 << 20
#: objects up to this size are copied with one CopyObject (S3's limit for it), bigger ones part by part
COPY_OBJECT_BYTES = 5 << 30
#: seconds the first request (the bucket check) waits for a connection and for an answer: an endpoint that
#: accepts connections but never answers fails in seconds, not after READ_TIMEOUT x attempts
CHECK_TIMEOUT = 5.0
READ_TIMEOUT = 60.0  # between bytes of any other request (a big GET from a slow store)
OPTION_ALIASES = {
    "key": "aws_access_key_id", "aws_access_key_id": "aws_access_key_id",
    "secret": "aws_secret_access_key", "aws_secret_access_key": "aws_secret_access_key",
    "token": "aws_session_token", "aws_session_token": "aws_session_token",
    "endpoint_url": "endpoint_url", "region": "region_name", "region_name": "region_name",
    "profile": "profile_name", "profile_name": "profile_name",
}
_TRANSIENT_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
                    "InternalError", "ServiceUnavailable", "ConditionalRequestConflict", "500", "502", "503", "504"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_DENIED_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "InvalidToken",
                 "ExpiredToken", "Forbidden"}


def _import_boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise ConfigurationError("s3:// cache roots need boto3: pip install 'stable-datasets[s3]'") from None
    return boto3


def _code(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def _is_transient(exc: BaseException) -> bool:
    from botocore import exceptions as bx

    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                        bx.ConnectTimeoutError, bx.ResponseStreamingError)):
        return True
    code, status = _code(exc)
    return code in _TRANSIENT_CODES or status >= 500


class S3Store(ObjectStore):
    scheme = "s3"

    def __init__(self, bucket: str, storage_options: dict[str, Any] | None = None, scheme: str = "s3"):
        boto3 = _import_boto3()
        from botocore.config import Config

        self.scheme, self.bucket = scheme, bucket
        self.storage_options = dict(storage_options or {})
        options: dict[str, Any] = {}
        for name, value in (storage_options or {}).items():
            if name == "client_kwargs" and isinstance(value, dict):  # s3fs nests endpoint and region here
                options.update({OPTION_ALIASES[k]: v for k, v in value.items() if k in OPTION_ALIASES})
            elif name in OPTION_ALIASES:
                options[OPTION_ALIASES[name]] = value
            else:
                raise ConfigurationError(f"unknown storage option {name!r} for {scheme}://{bucket}; known: "
                                         f"{sorted(set(OPTION_ALIASES) | {'client_kwargs'})}")
        endpoint = options.get("endpoint_url")
        config = Config(retries={"total_max_attempts": 1}, connect_timeout=CHECK_TIMEOUT, read_timeout=READ_TIMEOUT,
                        s3={"addressing_style": "path"} if endpoint else None, max_pool_connections=4 * PART_THREADS)
        self._endpoint_option, self._check_config = endpoint, config.merge(Config(read_timeout=CHECK_TIMEOUT))
        self._check_client: Any = None
        self._conditional = True  # False once the server refused If-None-Match (then: check, then write)
        try:  # a profile named by AWS_PROFILE but absent from ~/.aws fails here, or in client()
            session = boto3.session.Session(
                **{k: options.pop(k) for k in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                                                 "profile_name", "region_name") if k in options})
            self.region = session.region_name or "us-east-1"
            self.session = session
            self.client = session.client("s3", region_name=self.region, endpoint_url=endpoint, config=config)
        except Exception as exc:  # a bad profile name, a malformed endpoint
            raise StorageError(f"{self.url('')}: cannot set up an S3 client ({type(exc).__name__}: {exc}); check "
                               "AWS_PROFILE, AWS_ENDPOINT_URL and storage_options") from None
        self.endpoint = self.client.meta.endpoint_url

    # -- errors ---------------------------------------------------------------------------
    def _explain(self, exc: BaseException, key: str, what: str) -> StorageError:
        from botocore import exceptions as bx

        url = self.url(key)
        if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
            return StorageError(f"{url}: no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                                "(or AWS_PROFILE), or pass storage_options={'key': ..., 'secret': ...}")
        if isinstance(exc, bx.ProfileNotFound):
            return StorageError(f"{url}: {exc}; fix AWS_PROFILE or storage_options['profile']")
        if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError,
                            bx.ReadTimeoutError)):
            waited = CHECK_TIMEOUT if what == "check" or not isinstance(exc, bx.ReadTimeoutError) else READ_TIMEOUT
            timed_out = isinstance(exc, (bx.ConnectTimeoutError, bx.ReadTimeoutError))
            detail = f": no answer within {waited:g} s" if timed_out else ""
            return StorageError(f"{url}: cannot reach the endpoint {self.endpoint} after {max_attempts()} attempts "
                                f"({type(exc).__name__}{detail}); check AWS_ENDPOINT_URL (or storage_options="
                                "{'endpoint_url': ...}) and the network")
        code, status = _code(exc)
        if code == "NoSuchBucket" or (what == "check" and status == 404):
            return StorageError(f"{url}: bucket {self.bucket!r} does not exist at {self.endpoint}; create it, or fix "
                                "the URL or AWS_ENDPOINT_URL")
        if code in _DENIED_CODES:
            return StorageError(f"{url}: {self.endpoint} refused the request ({code}); check the credentials "
                                "(AWS_ACCESS_KEY_ID / AWS_PROFILE / storage_options) and the bucket's policy")
        message = getattr(exc, "response", {}).get("Error", {}).get("Message", "") if code else str(exc)
        return StorageError(f"{url}: {what} failed ({code or type(exc).__name__}: {message})")

    def _call(self, what: str, key: str, call: Callable[[], T]) -> T:
        try:
            return with_retries(call, _is_transient, f"{what} {self.url(key)}")
        except (StorageError, LocalWriteError):
            raise
        except Exception as exc:
            raise self._explain(exc, key, what) from None

    # -- operations -----------------------------------------------------------------------
    def check(self) -> None:
        """HEAD the bucket through a client with the short CHECK_TIMEOUT (made on the first check)."""
        if self._check_client is None:
            self._check_client = self.session.client("s3", region_name=self.region,
                                                     endpoint_url=self._endpoint_option, config=self._check_config)
        client = self._check_client
        self._call("check", "", lambda: client.head_bucket(Bucket=self.bucket))

    def _open_stream(self, key: str) -> BinaryIO | None:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as exc:
            if _code(exc)[0] in _MISSING_CODES:
                return None
            raise

    def get(self, key: str) -> bytes | None:
        def fetch() -> bytes | None:
            stream = self._open_stream(key)
            if stream is None:
                return None
            with stream:
                return stream.read()

        return self._call("read", key, fetch)

    def download(self, key: str, destination: Path) -> tuple[int, str]:
        return self._call("download", key, lambda: self._download(key, destination))

    conditional_reads = True

    def get_range(self, key: str, start: int, stop: int, etag: str = "") -> bytes:
        """One ranged GET (`Range: bytes=start-(stop-1)`), with If-Match on `etag` when given: another version of
        the object is ObjectChangedError (412), never bytes of two versions."""
        from botocore.exceptions import ClientError

        if stop <= start:
            return b""

        def fetch() -> bytes:
            extra = {"IfMatch": etag} if etag else {}
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{stop - 1}",
                                                **extra)
            except ClientError as exc:
                code, status = _code(exc)
                if code in _MISSING_CODES:
                    raise MissingObjectError(f"{self.url(key)}: object is missing") from None
                if code == "PreconditionFailed" or status == 412:
                    raise ObjectChangedError(f"{self.url(key)}: the object is no longer the version {etag}") from None
                if code == "InvalidRange":  # starts past the end
                    return b""
                raise
            with answer["Body"] as body:
                return body.read()

        return self._call("read", key, fetch)

    def _download(self, key: str, destination: Path) -> tuple[int, str]:
        """One GET for an object up to PART_BYTES. A bigger one (a Lance data file can be GBs) in ranges of
        PART_BYTES, PART_THREADS at a time, each asked with If-Match on the first range's ETag: an object
        replaced meanwhile fails the download (412), never mixes two versions."""
        from botocore.exceptions import ClientError

        try:
            first = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=0-{PART_BYTES - 1}")
        except ClientError as exc:
            code = _code(exc)[0]
            if code in _MISSING_CODES:
                raise MissingObjectError(f"{self.url(key)}: object is missing") from None
            if code == "InvalidRange":  # an empty object has no byte 0
                return ObjectStore.download(self, key, destination)
            raise
        total = str(first.get("ContentRange", "")).rpartition("/")[2]
        if not total.isdigit() or int(total) <= PART_BYTES:
            return save_stream(first["Body"], destination)
        return self._download_ranges(key, destination, first, int(total))

    def _download_ranges(self, key: str, destination: Path, first: dict[str, Any], total: int) -> tuple[int, str]:
        from botocore.exceptions import ClientError

        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.parent / f".{destination.name}.{uuid.uuid4().hex[:8]}.part"
        etag = first["ETag"]

        def part(start: int) -> None:
            stop = min(start + PART_BYTES, total)
            try:
                body = first["Body"] if start == 0 else self.client.get_object(
                    Bucket=self.bucket, Key=key, Range=f"bytes={start}-{stop - 1}", IfMatch=etag)["Body"]
            except ClientError as exc:
                if _code(exc)[0] in ("PreconditionFailed", "412"):
                    raise StorageError(f"{self.url(key)}: the object changed while it was downloaded (its ETag is "
                                       f"no longer {etag})") from None
                raise
            position = start
            with body:
                while chunk := body.read(CHUNK):  # streamed: PART_THREADS chunks in memory at most
                    view = memoryview(chunk)
                    while view:
                        with local_writes():
                            written = os.pwrite(fd, view, position)
                        position, view = position + written, view[written:]
            if position != stop:
                raise StorageError(f"{self.url(key)}: bytes {start}-{stop - 1} came back {position - start} bytes long")

        try:
            with local_writes():
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                with local_writes():
                    os.ftruncate(fd, total)
                with ThreadPoolExecutor(PART_THREADS) as pool:
                    list(pool.map(part, range(0, total, PART_BYTES)))
            finally:
                os.close(fd)
            digest = hashlib.sha256()
            with open(temporary, "rb") as written:
                while chunk := written.read(CHUNK):
                    digest.update(chunk)
            os.replace(temporary, destination)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return total, digest.hexdigest()

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=data))

    def put_file(self, path: Path, key: str) -> None:
        """One PUT up to UPLOAD_PART_BYTES; a bigger file (S3 takes at most 5 GB in one PUT) as a multipart upload."""
        def upload() -> None:
            if path.stat().st_size <= UPLOAD_PART_BYTES:
                with open(path, "rb") as body:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
                return
            from boto3.exceptions import S3UploadFailedError
            from boto3.s3.transfer import TransferConfig

            config = TransferConfig(multipart_threshold=UPLOAD_PART_BYTES, multipart_chunksize=UPLOAD_PART_BYTES,
                                    max_concurrency=PART_THREADS)
            try:
                self.client.upload_file(str(path), self.bucket, key, Config=config)
            except S3UploadFailedError as exc:  # boto3 wraps the store's answer: explain that one
                raise exc.__context__ if exc.__context__ is not None else exc from None

        self._call("upload", key, upload)

    def copy(self, source: str, key: str, size: int) -> None:
        """Server-side: one CopyObject up to 5 GB (S3's limit for it), else a multipart copy (UploadPartCopy)."""
        def copy() -> None:
            origin = {"Bucket": self.bucket, "Key": source}
            if size <= COPY_OBJECT_BYTES:
                self.client.copy_object(Bucket=self.bucket, Key=key, CopySource=origin)
                return
            from boto3.s3.transfer import TransferConfig

            self.client.copy(origin, self.bucket, key, Config=TransferConfig(
                multipart_threshold=UPLOAD_PART_BYTES, multipart_chunksize=UPLOAD_PART_BYTES,
                max_concurrency=PART_THREADS))

        self._call("copy", key, copy)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        def put() -> bool:
            if self._conditional:
                try:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
                    return True
                except ClientError as exc:
                    code, status = _code(exc)
                    if code == "PreconditionFailed" or status == 412:
                        return False
                    if code != "NotImplemented" and status != 501:
                        raise
                    self._conditional = False
                    logger.warning("{} refuses conditional puts (If-None-Match: {}); publishing checks, then writes",
                                   self.url(""), code or status)
            try:  # check-then-write: the lease keeps builders apart; a race past an expired one: the last wins
                self.client.head_object(Bucket=self.bucket, Key=key)
                return False
            except ClientError as exc:
                if _code(exc)[0] not in _MISSING_CODES:
                    raise
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
            return True

        return self._call("conditional write", key, put)

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        def fetch() -> tuple[bytes, str] | None:
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _code(exc)[0] in _MISSING_CODES:
                    return None
                raise
            return answer["Body"].read(), str(answer.get("ETag", ""))

        return self._call("read", key, fetch)

    def put_if_match(self, key: str, data: bytes, tag: str) -> bool:
        """PUT with `If-Match: <ETag>`; a server that refuses If-Match: check, then write (as put_if_absent)."""
        from botocore.exceptions import ClientError

        def put() -> bool:
            if self._conditional and tag:
                try:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfMatch=tag)
                    return True
                except ClientError as exc:
                    code, status = _code(exc)
                    if code in ("PreconditionFailed", *_MISSING_CODES) or status in (404, 412):
                        return False
                    if code != "NotImplemented" and status != 501:
                        raise
            return ObjectStore.put_if_match(self, key, data, tag)

        return self._call("conditional write", key, put)

    def list(self, prefix: str) -> list[ObjectInfo]:
        def listing() -> list[ObjectInfo]:
            found = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found.append(ObjectInfo(item["Key"], int(item["Size"]), item["LastModified"].timestamp(),
                                                 str(item.get("ETag", ""))))
            return found

        return self._call("list", prefix, listing)

    def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import ClientError

        def head() -> ObjectInfo | None:
            try:
                item = self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _code(exc)[0] in _MISSING_CODES:
                    return None
                raise
            return ObjectInfo(key, int(item["ContentLength"]), item["LastModified"].timestamp(),
                              str(item.get("ETag", "")))

        return self._call("read", key, head)

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start:start + 1000]]
            self._call("delete", keys[start], lambda b=batch: self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": b, "Quiet": True}))

    def lance_location(self, key: str) -> tuple[str, dict[str, str]]:
        """Lance reads in place with the same endpoint, region and credentials as boto3 resolved."""
        options = {"aws_region": self.region}
        if self.endpoint and not self.endpoint.startswith("https://s3."):
            options["aws_endpoint"] = self.endpoint
            if self.endpoint.startswith("http://"):
                options["allow_http"] = "true"
        credentials = self.session.get_credentials()
        if credentials is not None:
            frozen = credentials.get_frozen_credentials()
            options["aws_access_key_id"] = frozen.access_key
            options["aws_secret_access_key"] = frozen.secret_key
            if frozen.token:
                options["aws_session_token"] = frozen.token
        return f"s3://{self.bucket}/{key}", options

    def describe(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "bucket": self.bucket, "endpoint": self.endpoint, "region": self.region}
