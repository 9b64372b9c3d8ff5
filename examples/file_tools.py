"""Two app tools for ``ctxline run --tools file_tools:TOOLS``: read and write a text file.

Plain typed functions with docstrings: ctxline turns them into tool schemas. Paths are
relative to the folder in ``$FILE_TOOLS_DIR`` (default: the working directory) and may
not leave it.

    cd examples && ctxline run "Copy a.txt to b.txt in upper case" \\
        --model local:/path/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --tools file_tools:TOOLS --no-default-tools
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TOOLS", "read_text", "write_text"]


def _path(name: str) -> Path:
    root = Path(os.environ.get("FILE_TOOLS_DIR", ".")).resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise ValueError(f"{name!r} is outside {root}")
    return path


def read_text(path: str) -> str:
    """Read the text file at path (relative to the working folder)."""
    return _path(path).read_text(encoding="utf-8")


def write_text(path: str, text: str) -> str:
    """Write text to the file at path (relative to the working folder), replacing it."""
    _path(path).write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


TOOLS = [read_text, write_text]
