"""The object store contract, run against both backends: a real S3 server process and a local directory."""

import hashlib
import io
import os
import urllib.request
from pathlib import Path

import pytest

from shared.objectstore import LocalObjectStore, ObjectKeyError, ObjectNotFound, S3ObjectStore

pytestmark = pytest.mark.integration


@pytest.fixture(params=["s3", "local"])
def any_store(request, s3_server: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "s3":
        bucket = f"t-{os.urandom(4).hex()}"
        return S3ObjectStore(s3_server, bucket, "testing", "testing")
    return LocalObjectStore(tmp_path / "objects")


def test_put_get_roundtrip(any_store) -> None:  # type: ignore[no-untyped-def]
    any_store.put_bytes("tokens/run_1/ro_1/3/0.npz", b"abc")
    assert any_store.get_bytes("tokens/run_1/ro_1/3/0.npz") == b"abc"
    assert any_store.exists("tokens/run_1/ro_1/3/0.npz")
    assert any_store.size("tokens/run_1/ro_1/3/0.npz") == 3


def test_streaming_put_of_unknown_length_and_chunked_get(any_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(9 * 1024 * 1024 + 17)  # larger than one multipart part
    written = any_store.put_stream("weights/run_1/1/model.safetensors", io.BytesIO(data))
    assert written == len(data)
    digest = hashlib.sha256()
    for chunk in any_store.iter_chunks("weights/run_1/1/model.safetensors"):
        digest.update(chunk)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    out = tmp_path / "copy.bin"
    any_store.get_file("weights/run_1/1/model.safetensors", out)
    assert out.read_bytes() == data


def test_list_by_prefix_and_delete(any_store) -> None:  # type: ignore[no-untyped-def]
    for key in ["logs/r/a.txt", "logs/r/b.txt", "logs/s/c.txt", "patches/r/x.diff"]:
        any_store.put_bytes(key, key.encode())
    assert sorted(any_store.list("logs/r/")) == ["logs/r/a.txt", "logs/r/b.txt"]
    any_store.delete("logs/r/a.txt")
    assert not any_store.exists("logs/r/a.txt")
    assert sorted(any_store.list("logs/")) == ["logs/r/b.txt", "logs/s/c.txt"]


def test_missing_object_raises_not_found(any_store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ObjectNotFound):
        any_store.get_bytes("nope/none.bin")
    with pytest.raises(ObjectNotFound):
        list(any_store.iter_chunks("nope/none.bin"))
    with pytest.raises(ObjectNotFound):
        any_store.size("nope/none.bin")
    assert not any_store.exists("nope/none.bin")


def test_presigned_get_serves_the_object(any_store) -> None:  # type: ignore[no-untyped-def]
    any_store.put_bytes("patches/run_1/ro_1.diff", b"diff --git a b\n")
    url = any_store.presigned_get("patches/run_1/ro_1.diff", expires_s=60)
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == b"diff --git a b\n"


@pytest.mark.parametrize(
    "key", ["../escape", "a/../../etc/passwd", "/etc/passwd", "a//b", "a/./b", "", "a\\b", "a\x00b", "a/b/.."]
)
def test_unsafe_keys_are_refused_before_any_io(any_store, key: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ObjectKeyError):
        any_store.put_bytes(key, b"x")
    with pytest.raises(ObjectKeyError):
        any_store.get_bytes(key)


def test_bucket_is_created_once_and_reused(s3_server: str) -> None:
    first = S3ObjectStore(s3_server, "shared-bucket", "testing", "testing")
    first.put_bytes("a/b", b"1")
    second = S3ObjectStore(s3_server, "shared-bucket", "testing", "testing")
    assert second.get_bytes("a/b") == b"1"


def test_local_store_writes_are_atomic(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    class Exploding(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
            raise OSError("disk on fire")

    with pytest.raises(OSError):
        store.put_stream("half/written.bin", Exploding())  # type: ignore[arg-type]
    assert not store.exists("half/written.bin")
    assert list(store.list("")) == []


def test_local_store_writes_again_into_a_directory_removed_after_its_first_write(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    store.put_bytes("runs/r1/a.bin", b"first")
    (tmp_path / "objects" / "runs" / "r1" / "a.bin").unlink()
    (tmp_path / "objects" / "runs" / "r1").rmdir()  # the store remembers the directory; it is gone
    store.put_bytes("runs/r1/b.bin", b"second")
    assert store.get_bytes("runs/r1/b.bin") == b"second"
    assert list(store.list("runs/")) == ["runs/r1/b.bin"]


def test_local_store_skips_a_temporary_name_left_by_a_dead_process(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    store.put_bytes("d/first.bin", b"1")
    taken = [tmp_path / "objects" / "d" / f".tmp-{os.getpid()}-{n}" for n in range(1, 4)]
    for path in taken:  # the next names this process would pick, left behind by an earlier process of its pid
        path.write_bytes(b"stale")
    store.put_bytes("d/second.bin", b"2")
    assert store.get_bytes("d/second.bin") == b"2"
    assert all(path.read_bytes() == b"stale" for path in taken)
    assert list(store.list("d/")) == ["d/first.bin", "d/second.bin"]


def test_local_store_refuses_a_directory_that_is_a_symlink_out_of_the_store(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = LocalObjectStore(tmp_path / "objects")
    (tmp_path / "objects" / "escape").symlink_to(outside)
    with pytest.raises(ObjectKeyError):
        store.put_bytes("escape/x.bin", b"no")
    assert list(outside.iterdir()) == []


def test_local_store_checks_a_link_made_inside_a_directory_it_remembers(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = LocalObjectStore(tmp_path / "objects")
    store.put_bytes("runs/r1/a.bin", b"1")  # "runs" is remembered now
    (tmp_path / "objects" / "runs" / "r2").symlink_to(outside)
    with pytest.raises(ObjectKeyError):
        store.put_bytes("runs/r2/x.bin", b"no")
    assert list(outside.iterdir()) == []
    inside = tmp_path / "objects" / "runs" / "r1"
    (tmp_path / "objects" / "runs" / "r3").symlink_to(
        inside
    )  # a link that stays inside the store is followed
    store.put_bytes("runs/r3/b.bin", b"2")
    assert (inside / "b.bin").read_bytes() == b"2"


def test_local_store_makes_new_directories_under_remembered_ones_and_after_a_tree_is_removed(
    tmp_path: Path,
) -> None:
    import shutil

    store = LocalObjectStore(tmp_path / "objects")
    store.put_bytes("tokens/run/ro1/1/0.npz", b"a")
    store.put_bytes("tokens/run/ro1/2/0.npz", b"b")  # a new chain directory under a remembered rollout's
    store.put_bytes("tokens/run/ro2/3/0.npz", b"c")
    shutil.rmtree(tmp_path / "objects" / "tokens")  # every remembered directory is gone
    store.put_bytes("tokens/run/ro1/4/0.npz", b"d")
    assert list(store.list("tokens/")) == ["tokens/run/ro1/4/0.npz"]
    assert store.get_bytes("tokens/run/ro1/4/0.npz") == b"d"
