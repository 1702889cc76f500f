"""check_mp4 walks the top-level boxes of a file and refuses anything that is not an MP4."""

import struct
from pathlib import Path

import pytest

from bot.core.errors import NotAnMp4, ProtocolError
from bot.service.mp4 import check_mp4
from bot.simulator import DEFAULT_VIDEO_PATH

SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()


def box(kind: bytes, payload: bytes = b"", *, size: int | None = None) -> bytes:
    return struct.pack(">I4s", len(payload) + 8 if size is None else size, kind) + payload


def large_box(kind: bytes, payload: bytes, *, size: int | None = None) -> bytes:
    return struct.pack(">I4sQ", 1, kind, len(payload) + 16 if size is None else size) + payload


FTYP = box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2mp41")


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "video.mp4"
    path.write_bytes(data)
    return path


def test_the_packaged_sample_is_an_mp4() -> None:
    check_mp4(DEFAULT_VIDEO_PATH)


@pytest.mark.parametrize(
    "data",
    [
        FTYP + box(b"moov", b"\x00" * 20) + box(b"mdat", b"\x01" * 100),
        FTYP + box(b"mdat", b"\x01" * 100),
        FTYP + box(b"moov", b"\x00" * 20) + box(b"mdat", b"\x01" * 100, size=0),  # to the end of the file
        FTYP + large_box(b"mdat", b"\x01" * 100) + box(b"moov", b"\x00" * 4),  # 64-bit size
    ],
)
def test_well_formed_files_pass(tmp_path: Path, data: bytes) -> None:
    check_mp4(write(tmp_path, data))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty"),
        (b"<!DOCTYPE html><html><body>Service unavailable</body></html>", "ftyp"),
        (b'{"error": {"message": "job not found"}}', "ftyp"),
        (SAMPLE[: len(SAMPLE) // 2], "past the end"),  # truncated: mdat claims more than is there
        (SAMPLE + b"\x00\x00", "stray bytes"),
        (box(b"moov", b"\x00" * 20) + FTYP, "ftyp"),  # ftyp not first
        (box(b"ftyp", b"", size=8) + box(b"mdat", b"x"), "shorter than its own header"),  # ftyp without brands
        (box(b"ftyp", b"isom\x00\x00\x02\x00", size=10_000) + box(b"mdat"), "past the end"),  # ftyp size lie
        (FTYP + box(b"mdat", b"\x01" * 100, size=5), "shorter than its own header"),
        (FTYP + box(b"mdat", b"\x01" * 100, size=109), "past the end"),  # box-size lie by one byte
        (FTYP + large_box(b"mdat", b"\x01" * 100, size=12), "shorter than its own header"),
        (FTYP + large_box(b"mdat", b"\x01" * 100, size=2**63), "past the end"),
        (FTYP + struct.pack(">I4s", 1, b"mdat") + b"\x00\x00", "64-bit size"),
        (FTYP + box(b"free", b"\x00" * 8), "no 'moov' or 'mdat'"),
        (FTYP + box(b"mo\x00v", b"\x00" * 8) + box(b"mdat"), "readable type"),
    ],
)
def test_anything_else_is_refused(tmp_path: Path, data: bytes, why: str) -> None:
    with pytest.raises(NotAnMp4, match=why) as error:
        check_mp4(write(tmp_path, data))
    assert isinstance(error.value, ProtocolError)


@pytest.mark.parametrize(("data", "field"), [
    (b"<!DOCTYPE html><title>Admin</title>", b"CTYP"),  # a page's bytes 4-8 stand where a box's type would
    (b"HTTP/1.1 200 OK\r\n\r\nSECRET", b"/1.1"),
    (b"\x00\x00\x00\x10ftypisom\x00\x00\x02\x00" + b"\xff\xff\xff\xffSECR", b"SECR"),  # a box that runs past the end
    (b"\x00\x00\x00\x10ftypisom\x00\x00\x02\x00" + b"\x00\x00\x00\x04SECR", b"SECR"),  # shorter than its header
])
def test_a_refusal_quotes_no_byte_of_the_file(tmp_path: Path, data: bytes, field: bytes) -> None:
    """Whatever answered (an internal page a redirect pointed at), its reason shown by /status holds none of it."""
    with pytest.raises(NotAnMp4) as error:
        check_mp4(write(tmp_path, data))
    reason = str(error.value)
    assert field.decode() not in reason and "SECRET" not in reason and "Admin" not in reason
    assert str(0xFFFFFFFF) not in reason  # not even a size read from the file


def test_a_box_size_lie_inside_the_sample_is_caught(tmp_path: Path) -> None:
    # The sample's boxes: ftyp, moov, free, mdat. Make moov claim one byte more than it has.
    moov_at = SAMPLE.index(b"moov") - 4
    (moov_size,) = struct.unpack(">I", SAMPLE[moov_at : moov_at + 4])
    lie = SAMPLE[:moov_at] + struct.pack(">I", moov_size + 1) + SAMPLE[moov_at + 4 :]
    with pytest.raises(NotAnMp4):
        check_mp4(write(tmp_path, lie))


def test_only_headers_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 MiB mdat is skipped by seeking: reads stay a few bytes each."""
    path = tmp_path / "big.mp4"
    with path.open("wb") as f:
        f.write(FTYP + box(b"moov", b"\x00" * 8) + struct.pack(">I4s", 8 + 64 * 2**20, b"mdat"))
        f.truncate(len(FTYP) + 16 + 8 + 64 * 2**20)  # sparse: no 64 MiB written
    reads: list[int] = []
    real_open = Path.open

    def spying_open(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        f = real_open(self, *args, **kwargs)  # type: ignore[call-overload]
        real_read = f.read

        def read(n: int = -1) -> bytes:
            reads.append(n)
            return real_read(n)  # type: ignore[no-any-return]

        f.read = read
        return f

    monkeypatch.setattr(Path, "open", spying_open)
    check_mp4(path)
    assert reads and all(0 < n <= 8 for n in reads)
