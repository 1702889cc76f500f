"""Is a downloaded file an MP4 (ISO base media file)? Checked from its top-level box headers only.

Blocking file I/O: call `check_mp4` in a thread from async code. A refusal's reason (shown by /status) names offsets
and counts only, never a byte of the file: what was refused may be any host's answer.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from bot.core.errors import NotAnMp4

# Fragmented MP4 has a moof/mdat pair per fragment; far more than this is garbage, not a video.
MAX_TOP_LEVEL_BOXES = 100_000
_FTYP_MIN_SIZE = 16  # header, major brand, minor version


def check_mp4(path: Path) -> None:
    """Raise NotAnMp4 unless `path` is a chain of consistent top-level boxes starting with `ftyp`.

    Every box must have a size at least its header's and end within the file (size 1: a 64-bit size
    follows; size 0: the box runs to the end of the file, so it is the last one), and a `moov` or
    `mdat` box must be present. Only the headers are read, never the media.
    """
    with path.open("rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        if file_size == 0:
            raise NotAnMp4("the file is empty")
        offset = 0
        seen: set[bytes] = set()
        count = 0
        while offset < file_size:
            count += 1
            if count > MAX_TOP_LEVEL_BOXES:
                raise NotAnMp4(f"more than {MAX_TOP_LEVEL_BOXES} top-level boxes")
            f.seek(offset)
            header = f.read(8)
            if len(header) < 8:
                raise NotAnMp4(f"{len(header)} stray bytes at offset {offset}, too few for a box header")
            size, kind = struct.unpack(">I4s", header)
            header_size = 8
            if size == 1:
                large = f.read(8)
                if len(large) < 8:
                    raise NotAnMp4(f"box at offset {offset} lacks its 64-bit size")
                (size,) = struct.unpack(">Q", large)
                header_size = 16
            elif size == 0:
                size = file_size - offset
            if not all(0x20 <= byte <= 0x7E for byte in kind):
                raise NotAnMp4(f"box at offset {offset} has no readable type")
            if offset == 0 and kind != b"ftyp":
                raise NotAnMp4("the file does not start with an 'ftyp' box")
            if size < header_size or (kind == b"ftyp" and size < _FTYP_MIN_SIZE):
                raise NotAnMp4(f"the box at offset {offset} is shorter than its own header")
            if size > file_size - offset:
                raise NotAnMp4(f"the box at offset {offset} runs past the end of the file")
            seen.add(kind)
            offset += size
    if not seen & {b"moov", b"mdat"}:
        raise NotAnMp4("no 'moov' or 'mdat' box")
