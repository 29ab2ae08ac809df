"""The object store: one small interface, two backends (S3 through the ``minio`` client, a local directory).

Everything big lives here: token arrays, raw call bodies, patches, logs, weights, checkpoints, task tarballs.
Keys are relative, slash-separated paths (``tokens/<run>/<rollout>/...``); a key with ``..``, an absolute path,
a backslash or a control character is refused with ``ObjectKeyError`` before any I/O. Writes are atomic on both
backends: a reader sees the whole object or none of it.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import stat
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlparse

from shared.settings import Settings

CHUNK_BYTES = 1024 * 1024


class ObjectStoreError(Exception):
    """Base class of object-store failures."""


class ObjectKeyError(ObjectStoreError, ValueError):
    """The key is not a safe relative path."""


class ObjectNotFound(ObjectStoreError, KeyError):
    """No object under that key."""


def check_key(key: str) -> str:
    if not isinstance(key, str) or not key:
        raise ObjectKeyError("object key must be a non-empty string")
    if key.startswith("/") or "\\" in key or any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise ObjectKeyError(f"object key {key!r} must be a relative path without control characters")
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ObjectKeyError(f"object key {key!r} must not contain empty, '.' or '..' segments")
    return key


class ObjectStore(Protocol):
    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None: ...
    def put_stream(
        self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream"
    ) -> int: ...
    def put_file(self, key: str, path: Path) -> None: ...
    def get_bytes(self, key: str) -> bytes: ...
    def iter_chunks(self, key: str) -> Iterator[bytes]: ...
    def get_file(self, key: str, path: Path) -> None: ...
    def exists(self, key: str) -> bool: ...
    def size(self, key: str) -> int: ...
    def delete(self, key: str) -> None: ...
    def list(self, prefix: str = "") -> Iterator[str]: ...
    def presigned_get(self, key: str, expires_s: int = 3600) -> str: ...


class LocalObjectStore:
    """Objects as files under one directory (the embedded default).

    A write goes to a temporary file beside the object and is renamed over it. The directories written to are
    remembered (resolved and inside the root), so a write costs no path resolution or ``mkdir`` after the first
    one into its directory, and a new directory below a remembered one is one ``mkdir`` — the gateway writes two
    objects per model call, into a new directory or two for each rollout and chain."""

    DIRS_KEPT = 4096

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._dirs: dict[str, str] = {}
        self._temp_names = itertools.count()

    def _path(self, key: str) -> Path:
        path = (self.root / check_key(key)).resolve()
        if self.root not in path.parents:
            raise ObjectKeyError(f"object key {key!r} escapes the store")
        return path

    def _directory(self, key: str) -> tuple[str, str]:
        """The resolved directory an object of ``key`` goes in (made if need be) and the object's file name."""
        parent_key, _, name = check_key(key).rpartition("/")
        return self._resolved_directory(parent_key), name

    def _resolved_directory(self, dir_key: str) -> str:
        """The directory of ``dir_key``, made if need be, resolved and inside the root. Inside a remembered
        directory a new one is one ``mkdir``: a directory this call made is no link, so it needs no resolving
        (a new rollout or chain costs one system call per level, not a path resolution). An entry that already
        exists and is not a plain directory (a link) is resolved and checked as any path is."""
        if not dir_key:
            return str(self.root)
        directory = self._dirs.get(dir_key)
        if directory is not None:
            return directory
        above, _, leaf = dir_key.rpartition("/")
        path = f"{self._resolved_directory(above)}/{leaf}"
        try:
            os.mkdir(path)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                path = self._checked_directory(dir_key)
        except FileNotFoundError:  # a remembered directory above was removed since
            self._dirs.pop(above, None)
            path = self._checked_directory(dir_key)
        if len(self._dirs) >= self.DIRS_KEPT:
            self._dirs.clear()
        self._dirs[dir_key] = path
        return path

    def _checked_directory(self, dir_key: str) -> str:
        parent = self._path(dir_key)
        parent.mkdir(parents=True, exist_ok=True)
        return str(parent)

    def _open_temp(self, key: str) -> tuple[int, str, str]:
        """A new temporary file beside the object: (fd, its path, the object's path)."""
        for attempt in range(100):
            directory, name = self._directory(key)
            tmp = f"{directory}/.tmp-{os.getpid()}-{next(self._temp_names)}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:  # the directory was removed since it was remembered
                if attempt:
                    raise
                self._dirs.pop(key.rpartition("/")[0], None)
                continue
            except FileExistsError:  # left by a process that had this pid before
                continue
            return fd, tmp, f"{directory}/{name}"
        raise ObjectStoreError(f"no free temporary name beside {key!r}")

    def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> int:
        fd, tmp, path = self._open_temp(key)
        written = 0
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(CHUNK_BYTES):
                    out.write(chunk)
                    written += len(chunk)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return written

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self.put_stream(key, io.BytesIO(data), content_type)

    def put_file(self, key: str, path: Path) -> None:
        with open(path, "rb") as f:
            self.put_stream(key, f)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise ObjectNotFound(key) from None

    def iter_chunks(self, key: str) -> Iterator[bytes]:
        try:
            f = open(self._path(key), "rb")  # noqa: SIM115 - closed by the generator
        except (FileNotFoundError, IsADirectoryError):
            raise ObjectNotFound(key) from None
        with f:
            while chunk := f.read(CHUNK_BYTES):
                yield chunk

    def get_file(self, key: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            for chunk in self.iter_chunks(key):
                out.write(chunk)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def list(self, prefix: str = "") -> Iterator[str]:
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.name.startswith(".tmp-"):
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key

    def presigned_get(self, key: str, expires_s: int = 3600) -> str:
        path = self._path(key)
        if not path.is_file():
            raise ObjectNotFound(key)
        return path.as_uri()


class S3ObjectStore:
    """Objects in an S3 bucket (MinIO, AWS, or any S3 server) through the ``minio`` client."""

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        access_key: str,
        secret_key: str,
        secure: bool = False,
        region: str = "us-east-1",
    ) -> None:
        from minio import Minio

        self.bucket = bucket
        self.client = Minio(
            endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region
        )
        self._ensure_bucket()

    def _ensure_bucket(self) -> None:
        from minio.error import S3Error

        for attempt in range(5):
            try:
                if not self.client.bucket_exists(self.bucket):
                    self.client.make_bucket(self.bucket)
                return
            except S3Error as exc:
                if exc.code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    return
                raise
            except Exception:
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> int:
        counted = _CountingReader(stream)
        self.client.put_object(
            self.bucket,
            check_key(key),
            counted,  # type: ignore[arg-type]
            length=-1,
            part_size=8 * CHUNK_BYTES,
            content_type=content_type,
        )
        return counted.count

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self.client.put_object(
            self.bucket, check_key(key), io.BytesIO(data), len(data), content_type=content_type
        )

    def put_file(self, key: str, path: Path) -> None:
        self.client.fput_object(self.bucket, check_key(key), str(path))

    def _get(self, key: str):  # type: ignore[no-untyped-def]
        from minio.error import S3Error

        try:
            return self.client.get_object(self.bucket, check_key(key))
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchObject"):
                raise ObjectNotFound(key) from None
            raise

    def get_bytes(self, key: str) -> bytes:
        resp = self._get(key)
        try:
            return resp.read()
        finally:
            resp.close()
            resp.release_conn()

    def iter_chunks(self, key: str) -> Iterator[bytes]:
        resp = self._get(key)
        try:
            yield from resp.stream(CHUNK_BYTES)
        finally:
            resp.close()
            resp.release_conn()

    def get_file(self, key: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            for chunk in self.iter_chunks(key):
                out.write(chunk)

    def _stat(self, key: str):  # type: ignore[no-untyped-def]
        from minio.error import S3Error

        try:
            return self.client.stat_object(self.bucket, check_key(key))
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchObject", "NotFound"):
                raise ObjectNotFound(key) from None
            raise

    def exists(self, key: str) -> bool:
        try:
            self._stat(key)
            return True
        except ObjectNotFound:
            return False

    def size(self, key: str) -> int:
        return int(self._stat(key).size)

    def delete(self, key: str) -> None:
        self.client.remove_object(self.bucket, check_key(key))

    def list(self, prefix: str = "") -> Iterator[str]:
        for obj in self.client.list_objects(self.bucket, prefix=prefix, recursive=True):
            yield obj.object_name

    def presigned_get(self, key: str, expires_s: int = 3600) -> str:
        self._stat(key)
        return self.client.presigned_get_object(
            self.bucket, check_key(key), expires=timedelta(seconds=expires_s)
        )


class _CountingReader(io.RawIOBase):
    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        self.count += len(data)
        return data

    def readable(self) -> bool:
        return True


def open_store(settings: Settings) -> ObjectStore:
    """The store the settings name: ``s3://BUCKET`` or ``file:///DIR`` (empty path = data_dir/objects)."""
    parsed = urlparse(settings.object_store_url)
    if parsed.scheme == "s3":
        return S3ObjectStore(
            settings.s3_endpoint,
            parsed.netloc,
            settings.s3_access_key,
            settings.s3_secret_key,
            secure=settings.s3_secure,
            region=settings.s3_region,
        )
    return LocalObjectStore(settings.object_store_dir)
