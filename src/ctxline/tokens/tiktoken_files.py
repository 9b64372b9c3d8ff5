"""Load tiktoken's ``o200k_base`` and ``cl100k_base`` encodings offline, verified.

tiktoken downloads its BPE rank files on first use, and on a hash mismatch it
deletes the cached file — unusable on a machine with no network, and dangerous to
point at someone else's folder. So ctxline finds the file itself, in this order:
``$CTXLINE_TIKTOKEN_DIR``, ``$TIKTOKEN_CACHE_DIR``, then the copies bundled inside
this package (``ctxline/tokens/tiktoken_data/<name>.tiktoken.xz``, 1.7 MB for both,
decompressed with the standard library's ``lzma``). In each folder a file may be
named by tiktoken's cache key, ``<name>.tiktoken`` or ``<name>.tiktoken.xz``. A file is
used only if the sha256 of its (decompressed) bytes is the one tiktoken expects; a
file that fails the check is skipped and never modified. The ranks, split regex and
special tokens then build a ``tiktoken.Encoding`` equal to ``tiktoken.get_encoding``'s
(copied from ``tiktoken_ext/openai_public.py``). Encodings are cached per process.

    >>> encoding("o200k_base").encode_ordinary("hello world")
    [24912, 2375]
"""

from __future__ import annotations

import binascii
import hashlib
import lzma
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ctxline.errors import TokenizerUnavailable

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "BUNDLED_DIR",
    "SPECS",
    "EncodingSpec",
    "bundled_dir",
    "check_encoding",
    "encoding",
    "load_encoding",
    "search_dirs",
]

BUNDLED_DIR = Path(__file__).resolve().with_name("tiktoken_data")
"""The compressed copies of both rank files shipped inside the package."""

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

_CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """Where an encoding's rank file comes from, its sha256, and its split rules."""

    name: str
    url: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int] = field(hash=False)

    @property
    def cache_key(self) -> str:
        """tiktoken's cache file name: the sha1 of the download URL."""
        return hashlib.sha1(self.url.encode()).hexdigest()

    @property
    def file_names(self) -> tuple[str, str, str]:
        """Names looked for in each folder: tiktoken's cache key, plain, xz-compressed."""
        return (self.cache_key, f"{self.name}.tiktoken", f"{self.name}.tiktoken.xz")


SPECS: dict[str, EncodingSpec] = {
    "o200k_base": EncodingSpec(
        "o200k_base",
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": EncodingSpec(
        "cl100k_base",
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}


def bundled_dir() -> Path:
    """The folder of the copies bundled with ctxline (:data:`BUNDLED_DIR`)."""
    return BUNDLED_DIR


def search_dirs() -> list[Path]:
    """The folders searched, in order: the two environment variables, then the bundled copies."""
    dirs = [
        Path(v)
        for v in (os.environ.get(k) for k in ("CTXLINE_TIKTOKEN_DIR", "TIKTOKEN_CACHE_DIR"))
        if v
    ]
    dirs.append(bundled_dir())
    return dirs


_PARSE_CHUNK = 1 << 16
"""Bytes of the rank file split at a time (whole lines): the file's 400,000 fields as one
list were 30 MB beside the dict being built from them (issue 25)."""


def _parse_ranks(data: bytes, path: Path) -> dict[bytes, int]:
    # One split per chunk and C-level maps: a Python loop of 200,000 b64decode calls was
    # 0.6 s of every process's first count (issue 25). The file's sha256 was checked already.
    ranks: dict[bytes, int] = {}
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", min(start + _PARSE_CHUNK, size))
        end = size if end < 0 else end + 1
        fields = data[start:end].split()
        start = end
        if len(fields) % 2:
            raise TokenizerUnavailable(
                f"{path}: malformed rank file (lines of two fields expected)"
            )
        try:
            ranks.update(
                zip(
                    map(binascii.a2b_base64, fields[0::2]),
                    map(int, fields[1::2]),
                    strict=True,
                )
            )
        except (ValueError, binascii.Error) as exc:
            raise TokenizerUnavailable(f"{path}: malformed rank line ({exc})") from None
    return ranks


def _unavailable(
    spec: EncodingSpec, dirs: Sequence[Path], rejected: Sequence[str]
) -> TokenizerUnavailable:
    searched = ", ".join(str(d) for d in dirs) or "(no folders)"
    message = (
        f"exact tokenizer {spec.name} is unavailable offline: no file with sha256 {spec.sha256} "
        f"was found. ctxline ships it as {BUNDLED_DIR / spec.file_names[2]}: if that copy is "
        f"missing or damaged, reinstall ctxline, or download {spec.url} into a folder as "
        f"{spec.file_names[1]!r} (or {spec.cache_key!r}) and set CTXLINE_TIKTOKEN_DIR to that "
        f"folder; or use the estimator get_counter('bytes/4'). Searched: {searched}."
    )
    if rejected:
        message += " Rejected: " + "; ".join(rejected) + "."
    return TokenizerUnavailable(message)


def _find(spec: EncodingSpec, dirs: Sequence[Path]) -> tuple[Path, bytes]:
    """The first verified rank file in ``dirs`` and its (decompressed) bytes."""
    rejected: list[str] = []
    for folder in dirs:
        for file_name in spec.file_names:
            path = folder / file_name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if path.suffix == ".xz":
                try:
                    data = lzma.decompress(data)
                except lzma.LZMAError as exc:
                    rejected.append(f"{path} is not a valid xz file ({exc})")
                    continue
            actual = hashlib.sha256(data).hexdigest()
            if actual != spec.sha256:
                what = "decompressed to" if path.suffix == ".xz" else "has"
                rejected.append(f"{path} {what} sha256 {actual}, expected {spec.sha256}")
                continue
            return path, data
    raise _unavailable(spec, dirs, rejected)


@cache
def _offline_class() -> type[tiktoken.Encoding]:
    import tiktoken

    class OfflineEncoding(tiktoken.Encoding):
        """An Encoding without its ``dict`` of 200,000 ranks: tiktoken keeps that dict only
        to pickle itself, and it was 27 MB of the 75 MB o200k costs a process (issue 25:
        a 50 MB tool output had to fit in 3x). Pickled, it is reloaded by name."""

        def __reduce__(self) -> tuple[object, tuple[str]]:
            return encoding, (self.name,)

    return OfflineEncoding


def _build(spec: EncodingSpec, found: list[tuple[Path, bytes]]) -> tiktoken.Encoding:
    """The encoding from ``found`` (a verified file and its bytes: emptied, so the 3.6 MB
    of text are gone while the Rust side copies the ranks)."""
    path, data = found.pop()
    ranks = _parse_ranks(data, path)
    del data
    enc = _offline_class()(
        name=spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
    )
    enc._mergeable_ranks = {}  # the Rust side holds its own copy
    return enc


def load_encoding(name: str, dirs: Sequence[Path] | None = None) -> tiktoken.Encoding:
    """Build the encoding from the first verified file in ``dirs`` (default :func:`search_dirs`).

    Not cached; files are only read. Raises :class:`TokenizerUnavailable` naming the
    file, its hash and every rejected candidate when no verified file is found.
    """
    spec = SPECS[name]
    return _build(spec, [_find(spec, search_dirs() if dirs is None else list(dirs))])


_CACHE: dict[str, tiktoken.Encoding] = {}
_FOUND: dict[str, tuple[Path, bytes]] = {}
_LOCK = threading.Lock()


def check_encoding(name: str) -> None:
    """Raise :class:`TokenizerUnavailable` now if ``name`` cannot be loaded, without
    building it: the verified file is kept, and :func:`encoding` builds from it when first
    asked. Why: o200k's tables are 48 MB, and 28 MB more while they are built; a process
    that reads a 50 MB output back before it counts anything should not hold them while
    it reads (issue 25)."""
    if name in _CACHE or name in _FOUND:
        return
    with _LOCK:
        if name not in _CACHE and name not in _FOUND:
            _FOUND[name] = _find(SPECS[name], search_dirs())


def encoding(name: str) -> tiktoken.Encoding:
    """The encoding ``name`` (a key of :data:`SPECS`), loaded once per process."""
    found = _CACHE.get(name)
    if found is None:
        with _LOCK:
            found = _CACHE.get(name)
            if found is None:
                spec = SPECS[name]
                box = [_FOUND.pop(name, None) or _find(spec, search_dirs())]
                found = _CACHE[name] = _build(spec, box)  # box: emptied, the bytes dropped
    return found
