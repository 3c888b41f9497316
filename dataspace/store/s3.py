"""The S3 store: ``s3://bucket/prefix`` on AWS or any S3-compatible service.

boto3 is imported only when a store is used. The endpoint comes from the
``endpoint_url`` option, else ``DATASPACE_S3_ENDPOINT``, else ``AWS_ENDPOINT_URL`` (resolved
by ``S3Store.from_uri``); credentials come from the options when given, else from the
normal boto3 chain (environment, profile, container or instance role).

Writes are atomic by S3's own semantics: an object appears whole after a single PUT or a
completed multipart upload. Objects at or above ``multipart_threshold`` are sent and
fetched in ``multipart_chunksize`` parts by boto3's transfer manager, in parallel.

Write-once puts (``overwrite=False``) are conditional writes: the PUT (or the
CompleteMultipartUpload) carries ``If-None-Match: *``, so the server refuses it with 412
when the key exists, even when two writers race. Each such write carries a random
``x-amz-meta-dataspace-write-id``; a 412 whose existing object bears our own id means an
earlier try of this very write landed (its answer was lost and the call retried), and
counts as success. With ``conditional_writes="auto"`` (the default), a server that answers
501 Not Implemented to the conditional header makes the store fall back, for the rest of
its life, to HEAD-then-PUT, which is not race-safe: two writers racing on one key may both
succeed. ``conditional_writes="head"`` forces that fallback; use it for servers that ignore
the header silently (``probe_conditional_writes`` tells), ``"native"`` never falls back.

Retries have two layers: botocore retries each request (``retry_mode`` ``standard`` or
``adaptive``, ``max_attempts``), and every store operation is retried as a whole on
throttling, 5xx and connection errors with bounded full-jitter backoff
(``backoff_attempts``, ``backoff_base``, ``backoff_cap``). Failures that remain raise
``StoreError`` naming the URI; a missing key raises ``NotFoundError``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar

from dataspace.errors import AlreadyExistsError, ConfigError, NotFoundError, StoreError
from dataspace.store.keys import check_key, folder_prefix, key_problem
from dataspace.store.retry import Backoff, call_with_backoff
from dataspace.store.uris import build_options, split_s3_uri

logger = logging.getLogger(__name__)

T = TypeVar("T")

MiB = 1024 * 1024
WRITE_ID = "dataspace-write-id"
_NOT_FOUND_CODES = {"NoSuchKey", "NotFound", "404"}
_DENIED_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"}
_Keys = list[str]  # spelled here: inside S3Store, ``list`` is the method


@dataclass(frozen=True, kw_only=True)
class S3Options:
    """Options of the S3 store.

    Attributes:
        endpoint_url: the service URL (MinIO, Ceph, moto...); None for AWS.
        region: the region name; None for the boto3 chain's region.
        profile: a profile of the shared AWS config files.
        access_key_id: an explicit access key (else the boto3 credential chain).
        secret_access_key: the secret of ``access_key_id``.
        session_token: a session token for temporary credentials.
        addressing_style: ``path``, ``virtual`` or ``auto``; None means ``path`` with a
            custom endpoint (what MinIO and Ceph expect) and ``auto`` on AWS.
        retry_mode: botocore's retry mode, ``standard`` or ``adaptive`` (client-side rate
            limiting when the service throttles).
        max_attempts: botocore's tries per HTTP request, the first one included.
        backoff_attempts: our tries per store operation.
        backoff_base: our first backoff delay cap, in seconds.
        backoff_cap: our largest backoff delay cap, in seconds.
        connect_timeout: seconds to wait for a connection.
        read_timeout: seconds to wait for a response.
        max_pool_connections: HTTP connections kept per client.
        multipart_threshold: objects of at least this many bytes use multipart transfers.
        multipart_chunksize: the part size of multipart transfers (S3 needs 5 MiB or more).
        max_concurrency: parallel parts per transfer.
        list_page_size: keys requested per ListObjectsV2 page (at most 1,000).
        conditional_writes: ``auto``, ``native`` or ``head`` (see the module docstring).
        request_checksums: botocore's ``request_checksum_calculation``; None means
            ``when_required`` with a custom endpoint (some S3-compatible servers reject
            the newer checksum trailers) and ``when_supported`` on AWS.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    addressing_style: Literal["auto", "path", "virtual"] | None = None
    retry_mode: Literal["standard", "adaptive"] = "standard"
    max_attempts: int = 5
    backoff_attempts: int = 4
    backoff_base: float = 0.25
    backoff_cap: float = 10.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_pool_connections: int = 32
    multipart_threshold: int = 16 * MiB
    multipart_chunksize: int = 16 * MiB
    max_concurrency: int = 8
    list_page_size: int = 1000
    conditional_writes: Literal["auto", "native", "head"] = "auto"
    request_checksums: Literal["when_supported", "when_required"] | None = None

    def __post_init__(self) -> None:
        _choice("addressing_style", self.addressing_style, ("auto", "path", "virtual", None))
        _choice("retry_mode", self.retry_mode, ("standard", "adaptive", "legacy"))
        _choice("conditional_writes", self.conditional_writes, ("auto", "native", "head"))
        _choice(
            "request_checksums", self.request_checksums, ("when_supported", "when_required", None)
        )
        if not 1 <= self.list_page_size <= 1000:
            raise ValueError(f"list_page_size must be 1..1000, got {self.list_page_size}")
        if self.multipart_chunksize < 5 * MiB:
            raise ValueError(
                f"multipart_chunksize must be at least 5 MiB (S3's minimum part size), "
                f"got {self.multipart_chunksize}"
            )
        for name in ("max_attempts", "max_pool_connections", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.multipart_threshold < 1:
            raise ValueError("multipart_threshold must be positive")
        Backoff(attempts=self.backoff_attempts, base=self.backoff_base, cap=self.backoff_cap)


def _choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")


def resolve_endpoint(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """The S3 endpoint: the explicit one, else DATASPACE_S3_ENDPOINT, else AWS_ENDPOINT_URL.

    >>> resolve_endpoint(None, {"AWS_ENDPOINT_URL": "http://b", "DATASPACE_S3_ENDPOINT": "http://a"})
    'http://a'
    >>> resolve_endpoint("http://c", {"DATASPACE_S3_ENDPOINT": "http://a"})
    'http://c'
    >>> resolve_endpoint(None, {}) is None
    True
    """
    for value in (explicit, environ.get("DATASPACE_S3_ENDPOINT"), environ.get("AWS_ENDPOINT_URL")):
        if value:
            return value
    return None


def _is_connection_error(exc: BaseException) -> bool:
    """A failure to reach the endpoint at all (refused, DNS, TLS, connect timeout)."""
    from botocore.exceptions import ConnectionError as BotoConnectionError

    return isinstance(exc, BotoConnectionError)


def _error_info(exc: BaseException) -> tuple[str, int]:
    """The error code and HTTP status of a botocore ClientError (else ``("", 0)``)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return "", 0
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return code, status


def _is_precondition_failed(exc: BaseException) -> bool:
    code, status = _error_info(exc)
    return status == 412 or code == "PreconditionFailed"


def _is_not_implemented(exc: BaseException) -> bool:
    code, status = _error_info(exc)
    return status == 501 or code == "NotImplemented"


def _add_if_none_match(params: dict[str, Any], **_: Any) -> None:
    params.setdefault("IfNoneMatch", "*")


class S3Store:
    """A store under ``s3://bucket/prefix``.

    Args:
        bucket: the bucket (it must exist).
        prefix: the folder inside the bucket, ``""`` for the whole bucket.
        options: see ``S3Options``; the endpoint is used as given (no environment lookup).

    Raises:
        ConfigError: the bucket or the prefix is malformed.

    The store is thread-safe, and picklable (it reconnects after unpickling), so one
    store can be shipped to Ray workers.
    """

    def __init__(self, bucket: str, prefix: str = "", *, options: S3Options | None = None):
        self.bucket, self.prefix = split_s3_uri(f"s3://{bucket}/{prefix}")
        self.options = options or S3Options()
        self.uri = f"s3://{bucket}/{self.prefix}"
        self._setup()

    def _setup(self) -> None:
        opts = self.options
        self._lock = threading.Lock()
        self._clients: dict[bool, Any] = {}
        self._managers: dict[bool, Any] = {}
        self._conditional = opts.conditional_writes
        self._backoff = Backoff(
            attempts=opts.backoff_attempts, base=opts.backoff_base, cap=opts.backoff_cap
        )

    @classmethod
    def from_uri(cls, uri: str, **options: Any) -> S3Store:
        """Open ``s3://bucket/prefix`` with ``S3Options`` fields as keyword options.

        The endpoint falls back to DATASPACE_S3_ENDPOINT, then AWS_ENDPOINT_URL.

        Raises:
            ConfigError: malformed URI, unknown or bad options, or boto3 missing.
        """
        bucket, prefix = split_s3_uri(uri)
        if importlib.util.find_spec("boto3") is None:
            raise ConfigError(f"{uri}: s3:// stores need boto3: pip install boto3")
        opts = build_options(S3Options, options, uri=uri)
        endpoint = resolve_endpoint(opts.endpoint_url, os.environ)
        if endpoint != opts.endpoint_url:
            opts = build_options(S3Options, {**options, "endpoint_url": endpoint}, uri=uri)
        return cls(bucket, prefix, options=opts)

    def __repr__(self) -> str:
        where = f", endpoint={self.options.endpoint_url!r}" if self.options.endpoint_url else ""
        return f"S3Store({self.uri!r}{where})"

    def __getstate__(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "prefix": self.prefix, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.bucket = state["bucket"]
        self.prefix = state["prefix"]
        self.options = state["options"]
        self.uri = f"s3://{self.bucket}/{self.prefix}"
        self._setup()

    # -- clients -----------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The boto3 S3 client used for plain calls (created on first use)."""
        return self._client(conditional=False)

    def _client(self, *, conditional: bool) -> Any:
        with self._lock:
            client = self._clients.get(conditional)
            if client is None:
                client = self._make_client()
                if conditional:
                    # The transfer manager does not pass IfNoneMatch through, so a
                    # dedicated client adds it to every PutObject/CompleteMultipartUpload.
                    for op in ("PutObject", "CompleteMultipartUpload"):
                        client.meta.events.register(
                            f"before-parameter-build.s3.{op}", _add_if_none_match
                        )
                self._clients[conditional] = client
            return client

    def _make_client(self) -> Any:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:  # pragma: no cover - boto3 is a dependency
            raise StoreError(f"{self.uri}: s3:// stores need boto3 (pip install boto3)") from exc
        opts = self.options
        custom = opts.endpoint_url is not None
        session = boto3.session.Session(
            aws_access_key_id=opts.access_key_id,
            aws_secret_access_key=opts.secret_access_key,
            aws_session_token=opts.session_token,
            region_name=opts.region,
            profile_name=opts.profile,
        )
        checksums = opts.request_checksums or ("when_required" if custom else "when_supported")
        config = Config(
            retries={"mode": opts.retry_mode, "total_max_attempts": opts.max_attempts},
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.read_timeout,
            max_pool_connections=opts.max_pool_connections,
            s3={"addressing_style": opts.addressing_style or ("path" if custom else "auto")},
            request_checksum_calculation=checksums,
            response_checksum_validation=checksums,
            user_agent_extra="dataspace",
        )
        return session.client("s3", endpoint_url=opts.endpoint_url, config=config)

    def _manager(self, *, conditional: bool) -> Any:
        client = self._client(conditional=conditional)
        with self._lock:
            manager = self._managers.get(conditional)
            if manager is None:
                from boto3.s3.transfer import TransferConfig, create_transfer_manager

                opts = self.options
                config = TransferConfig(
                    multipart_threshold=opts.multipart_threshold,
                    multipart_chunksize=opts.multipart_chunksize,
                    max_concurrency=opts.max_concurrency,
                    preferred_transfer_client="classic",
                )
                manager = create_transfer_manager(client, config)
                self._managers[conditional] = manager
            return manager

    def close(self) -> None:
        """Shut down the transfer threads and drop the clients (reopened on next use)."""
        with self._lock:
            managers = list(self._managers.values())
            self._managers.clear()
            self._clients.clear()
        for manager in managers:
            manager.shutdown()

    # -- helpers -----------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key, where=self.uri)

    def url_for(self, key: str) -> str:
        """The full ``s3://`` URI of ``key``."""
        return f"s3://{self.bucket}/{self._key(key)}"

    def local_path(self, key: str) -> Path | None:
        """Always None: S3 objects have no local path."""
        check_key(key, where=self.uri)
        return None

    def _call(self, op: str, where: str, fn: Callable[[], T]) -> T:
        try:
            return call_with_backoff(fn, policy=self._backoff, describe=f"{op} {where}")
        except Exception as exc:
            raise self._translate(exc, op, where) from exc

    def _translate(self, exc: BaseException, op: str, where: str) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        from botocore.exceptions import NoCredentialsError, PartialCredentialsError

        tries = getattr(exc, "retry_attempts", 1)
        code, status = _error_info(exc)
        if code in _NOT_FOUND_CODES or (status == 404 and code != "NoSuchBucket"):
            return NotFoundError(f"{where}: no such object")
        if code == "NoSuchBucket":
            return StoreError(
                f"{where}: bucket {self.bucket!r} does not exist; create it or fix the URI"
            )
        if code in _DENIED_CODES or status == 403:
            return StoreError(
                f"{where}: {op} refused ({code or status}); check the credentials, the "
                "endpoint and the bucket policy"
            )
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return StoreError(
                f"{where}: no S3 credentials found; set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or pass access_key_id and "
                f"secret_access_key{self._endpoint_hint()}"
            )
        hint = ""
        if _is_connection_error(exc):
            hint = (
                f"; could not reach the S3 endpoint "
                f"{self.options.endpoint_url or '(the AWS default)'}"
                f"{self._endpoint_hint(reached=False)}"
            )
        if code:
            message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", ""))
            detail = f"{code} (HTTP {status})" + (f": {message}" if message else "")
        else:
            detail = f"{type(exc).__name__}: {exc}"
        times = "1 try" if tries == 1 else f"{tries} tries"
        return StoreError(f"{where}: {op} failed after {times}: {detail}{hint}")

    def _endpoint_hint(self, *, reached: bool = True) -> str:
        """Where the endpoint comes from, for an error that may be a missing or wrong one."""
        if self.options.endpoint_url is None:
            return (
                "; no S3 endpoint is configured, so AWS's own is used: for MinIO, Ceph or "
                "another S3-compatible service set DATASPACE_S3_ENDPOINT (e.g. "
                "http://minio:9000)"
            )
        if reached:
            return ""
        return (
            "; check that the service runs there, or set DATASPACE_S3_ENDPOINT to its URL "
            "(the endpoint comes from the store's endpoint_url option, else "
            "DATASPACE_S3_ENDPOINT, else AWS_ENDPOINT_URL)"
        )

    # -- writes ------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes, *, overwrite: bool = True) -> None:
        """Write ``data`` at ``key`` (multipart when large); see the module docstring."""
        s3_key = self._key(key)
        payload = bytes(data)
        if len(payload) >= self.options.multipart_threshold:
            self._write(
                key, lambda cond, meta: self._upload(s3_key, payload, cond, meta), overwrite
            )
        else:
            self._write(key, lambda cond, meta: self._put(s3_key, payload, cond, meta), overwrite)

    def put_file(self, key: str, path: Path, *, overwrite: bool = True) -> None:
        """Upload the local file ``path`` to ``key`` (multipart when large)."""
        s3_key = self._key(key)
        try:
            size = Path(path).stat().st_size
        except OSError as exc:
            raise StoreError(f"{path}: cannot upload to {self.url_for(key)}: {exc}") from exc
        if size >= self.options.multipart_threshold:
            source = str(path)
            self._write(key, lambda cond, meta: self._upload(s3_key, source, cond, meta), overwrite)
            return
        try:
            payload = Path(path).read_bytes()
        except OSError as exc:
            raise StoreError(f"{path}: cannot upload to {self.url_for(key)}: {exc}") from exc
        self._write(key, lambda cond, meta: self._put(s3_key, payload, cond, meta), overwrite)

    def _put(self, s3_key: str, data: bytes, conditional: bool, meta: dict[str, str]) -> None:
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        extra: dict[str, Any] = {"Metadata": meta} if meta else {}
        if conditional:
            extra["IfNoneMatch"] = "*"
        self.client.put_object(Bucket=self.bucket, Key=s3_key, Body=data, ContentMD5=md5, **extra)

    def _upload(
        self, s3_key: str, source: bytes | str, conditional: bool, meta: dict[str, str]
    ) -> None:
        manager = self._manager(conditional=conditional)
        fileobj: BinaryIO | str = io.BytesIO(source) if isinstance(source, bytes) else source
        extra = {"Metadata": meta} if meta else None
        manager.upload(fileobj, self.bucket, s3_key, extra_args=extra).result()

    def _write(
        self,
        key: str,
        send: Callable[[bool, dict[str, str]], None],
        overwrite: bool,
    ) -> None:
        where = self.url_for(key)
        if overwrite:
            self._call("put", where, lambda: send(False, {}))
            return
        if self._conditional != "head":
            token = secrets.token_hex(16)
            try:
                call_with_backoff(
                    lambda: send(True, {WRITE_ID: token}),
                    policy=self._backoff,
                    describe=f"put {where}",
                )
                return
            except Exception as exc:
                if _is_precondition_failed(exc):
                    if self._written_by(key, token):
                        logger.info("%s: an earlier try of this write landed", where)
                        return
                    raise AlreadyExistsError(
                        f"{where}: already exists and is written once"
                    ) from None
                if not (_is_not_implemented(exc) and self._conditional == "auto"):
                    raise self._translate(exc, "put", where) from exc
                logger.warning(
                    "%s: the server does not support conditional writes (If-None-Match); "
                    "falling back to HEAD-then-PUT, which is not race-safe",
                    self.uri,
                )
                self._conditional = "head"
        if self.exists(key):
            raise AlreadyExistsError(f"{where}: already exists and is written once")
        self._call("put", where, lambda: send(False, {}))

    def _written_by(self, key: str, token: str) -> bool:
        try:
            head = self._call(
                "head",
                self.url_for(key),
                lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(key)),
            )
        except NotFoundError:
            return False
        return bool(head.get("Metadata", {}).get(WRITE_ID) == token)

    def probe_conditional_writes(self) -> bool:
        """Check that the server enforces ``If-None-Match: *`` on PUT.

        Writes a small object under ``.dataspace-probe/`` twice, then deletes it.

        Returns:
            True when the second write was refused (conditional writes work).
        """
        key = f".dataspace-probe/{secrets.token_hex(8)}"
        s3_key = self._key(key)
        self._call("put", self.url_for(key), lambda: self._put(s3_key, b"1", True, {}))
        try:
            self._put(s3_key, b"2", True, {})
        except Exception as exc:
            if _is_precondition_failed(exc):
                return True
            if _is_not_implemented(exc):
                return False
            raise self._translate(exc, "put", self.url_for(key)) from exc
        finally:
            self.delete(key)
        return False

    # -- reads -------------------------------------------------------------------------

    def get_bytes(self, key: str) -> bytes:
        """Read the whole object at ``key``.

        Raises:
            NotFoundError: no object at ``key``.
        """
        s3_key = self._key(key)

        def fetch() -> bytes:
            response = self.client.get_object(Bucket=self.bucket, Key=s3_key)
            with response["Body"] as body:
                return bytes(body.read())

        return self._call("get", self.url_for(key), fetch)

    def get_file(self, key: str, dest: Path) -> None:
        """Download ``key`` to ``dest`` (multipart when large, atomic, parents created).

        Raises:
            NotFoundError: no object at ``key``.
        """
        s3_key = self._key(key)
        target = Path(dest)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{dest}: cannot create the folder: {exc}") from exc

        def fetch() -> None:
            manager = self._manager(conditional=False)
            manager.download(self.bucket, s3_key, str(target)).result()

        self._call("get", self.url_for(key), fetch)

    def exists(self, key: str) -> bool:
        """Whether an object exists at ``key``."""
        s3_key = self._key(key)
        try:
            self._call(
                "head",
                self.url_for(key),
                lambda: self.client.head_object(Bucket=self.bucket, Key=s3_key),
            )
        except NotFoundError:
            return False
        return True

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key under the folder ``prefix``, sorted, one page at a time.

        Pages come from the ListObjectsV2 paginator, ``list_page_size`` keys each, fetched
        only as the iteration needs them. A page that fails transiently is fetched again,
        resuming after the last key yielded. Objects whose names are not valid keys
        (folder markers ending in ``/``, ``..`` segments) are skipped.
        """
        folder = folder_prefix(prefix, where=self.uri)
        full = self.prefix + folder
        where = f"s3://{self.bucket}/{full}"
        paginator = self.client.get_paginator("list_objects_v2")
        last: str | None = None
        pages: Iterator[dict[str, Any]] | None = None

        def next_page() -> dict[str, Any] | None:
            nonlocal pages
            if pages is None:
                extra = {"StartAfter": last} if last is not None else {}
                pages = iter(
                    paginator.paginate(
                        Bucket=self.bucket,
                        Prefix=full,
                        PaginationConfig={"PageSize": self.options.list_page_size},
                        **extra,
                    )
                )
            try:
                return next(pages, None)
            except Exception:
                pages = None
                raise

        while True:
            page = self._call("list", where, next_page)
            if page is None:
                return
            for item in page.get("Contents", ()):
                s3_key = item["Key"]
                last = s3_key
                key = s3_key[len(self.prefix) :]
                if key_problem(key) is not None:
                    logger.debug("%s: skipping object %r, not a valid key", self.uri, s3_key)
                    continue
                yield key

    # -- deletes -----------------------------------------------------------------------

    def delete(self, key: str) -> None:
        """Delete the object at ``key``; a missing key is not an error."""
        s3_key = self._key(key)
        self._call(
            "delete",
            self.url_for(key),
            lambda: self.client.delete_object(Bucket=self.bucket, Key=s3_key),
        )

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the folder ``prefix`` with batched DeleteObjects.

        Returns:
            How many objects were deleted.

        Raises:
            StoreError: the server refused to delete some objects (the first is named).
        """
        folder = folder_prefix(prefix, where=self.uri)
        where = f"s3://{self.bucket}/{self.prefix}{folder}"
        deleted = 0
        batch: _Keys = []
        for key in self.list(folder):
            batch.append(self.prefix + key)
            if len(batch) == 1000:
                deleted += self._delete_batch(batch, where)
                batch = []
        if batch:
            deleted += self._delete_batch(batch, where)
        return deleted

    def _delete_batch(self, s3_keys: _Keys, where: str) -> int:
        request = {"Objects": [{"Key": k} for k in s3_keys], "Quiet": True}
        response = self._call(
            "delete",
            where,
            lambda: self.client.delete_objects(Bucket=self.bucket, Delete=request),
        )
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise StoreError(
                f"s3://{self.bucket}/{first.get('Key')}: delete failed: "
                f"{first.get('Code')}: {first.get('Message')} "
                f"({len(errors)} of {len(s3_keys)} objects in the batch not deleted)"
            )
        return len(s3_keys)
