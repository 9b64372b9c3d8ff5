"""The safe default tools of ``ctxline run``: read_file, list_dir, search_files in one folder.

Every path the model gives is taken relative to the root folder and checked after the
file system resolved it: ``..``, an absolute path elsewhere, or a symlink that leads out
of the root is refused (:class:`PathRefused`), never read. :func:`shell_tool` runs a
command in the root; it is only offered with ``--allow-shell`` and is marked
``requires_approval``, so each command is approved unless ``--approve auto``.

    tools = workspace_tools(Path("."))            # read-only, confined
    tools.append(shell_tool(Path(".")))           # opt-in, approved per command
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import subprocess
from pathlib import Path

from ctxline.runner.tools import FunctionTool, ToolMeta, function_tool

__all__ = [
    "PathRefused",
    "PatternRefused",
    "check_pattern",
    "confine",
    "shell_tool",
    "workspace_tools",
]

MAX_FILE_BYTES = 2_000_000
MAX_PATTERN_CHARS = 300
MAX_LINE_CHARS = 2_000
"""A line is matched on its first this many characters (bounds the work of each search)."""
MAX_SCAN_CHARS = 20_000_000
"""The most characters one search_files call matches before it stops and says so."""
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}


class PathRefused(PermissionError):
    """A path outside the root folder (directly, through ``..`` or through a symlink)."""


class PatternRefused(ValueError):
    """A search pattern whose matching time could explode (nested or overlapping repeats)."""


_QUANT = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\d*\})")


def check_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or :class:`PatternRefused` when it could backtrack
    catastrophically: Python's ``re`` holds the interpreter lock while it matches, so no
    timeout can stop it. Refused: a repeat inside a repeated group (``(a+)+``), an
    alternation inside a repeated group (``(a|aa)*``), back-references, and more than
    four unbounded repeats in all (``a*a*a*a*a*b``); the pattern is at most
    :data:`MAX_PATTERN_CHARS` characters. Lines are matched on at most
    :data:`MAX_LINE_CHARS` characters."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRefused(
            f"the pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
        )
    compiled = re.compile(pattern)
    if re.search(r"\\[1-9]|\(\?P=", pattern):
        raise PatternRefused("back-references are not supported by search_files")
    depth: list[bool] = []  # per open group: does it hold a repeat or an alternation?
    escaped = in_class = False
    repeats = 0
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        if in_class:
            in_class = ch != "]"
            continue
        if ch == "[":
            in_class = True
        elif ch == "(":
            depth.append(False)
        elif ch == "|" and depth:
            depth[-1] = True
        elif ch == ")" and depth:
            risky = depth.pop()
            nxt = pattern[i + 1 : i + 2]
            if risky and (nxt in ("*", "+") or nxt == "{"):
                raise PatternRefused(
                    "a repeated group that itself repeats or alternates (like '(a+)+' or"
                    " '(a|aa)*') can take exponential time: simplify the pattern"
                )
            if depth and (risky or nxt in ("*", "+", "?", "{")):
                depth[-1] = True
        elif ch in "*+" or (ch == "{" and _QUANT.match(pattern, i)):
            if ch in "*+" or "," in pattern[i : pattern.find("}", i) + 1]:
                repeats += 1
            if depth:
                depth[-1] = True
    if repeats > 4:
        raise PatternRefused(
            f"the pattern has {repeats} unbounded repeats; at most 4 keep a search fast"
        )
    return compiled


def _regular(path: Path, shown: str) -> os.stat_result:
    """``path``'s stat, or an error unless it is a regular file (a FIFO or a device would
    block the read forever)."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{shown!r} is not a regular file (a FIFO, socket or device is not read)")
    return info


def confine(root: Path, path: str) -> Path:
    """``path`` (relative to ``root``) resolved, or :class:`PathRefused` when it leaves ``root``."""
    base = root.resolve()
    if "\x00" in path:
        raise PathRefused(f"{path!r} holds a NUL character")
    target = (base / path).resolve()  # follows every symlink on the way
    if target != base and not target.is_relative_to(base):
        raise PathRefused(
            f"{path!r} is outside the root folder {str(base)!r}: paths are relative to it, "
            "and '..' or symlinks that lead out of it are refused"
        )
    return target


def _shown(root: Path, path: Path) -> str:
    rel = path.relative_to(root.resolve())
    return str(rel) if str(rel) != "." else "."


def workspace_tools(root: Path) -> list[FunctionTool]:
    """read_file, list_dir and search_files, confined to ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"the root folder {str(root)!r} is not a folder")

    def read_file(path: str, start_line: int = 1, max_lines: int = 400) -> str:
        """Read a text file in the workspace, with line numbers.

        Args:
            path: The file, relative to the workspace root.
            start_line: The first line to show (1 is the first line).
            max_lines: The most lines to show.
        """
        target = confine(root, path)
        if target.is_dir():
            raise IsADirectoryError(21, "is a directory", path)
        size = _regular(target, path).st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{path!r} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
        data = target.read_bytes()
        if b"\x00" in data[:8192]:
            raise ValueError(f"{path!r} is a binary file")
        lines = data.decode("utf-8", "replace").splitlines()
        start = max(1, start_line)
        chosen = lines[start - 1 : start - 1 + max(1, max_lines)]
        body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(chosen, start=start))
        rest = len(lines) - (start - 1 + len(chosen))
        more = (
            f"\n[{rest} more lines: read on with start_line={start + len(chosen)}]"
            if rest > 0
            else ""
        )
        return f"{_shown(root, target)} ({len(lines)} lines)\n{body}{more}"

    def list_dir(path: str = ".") -> str:
        """List a folder of the workspace: sub-folders end with '/', files show their size.

        Args:
            path: The folder, relative to the workspace root.
        """
        target = confine(root, path)
        if not target.is_dir():
            raise NotADirectoryError(20, "not a directory", path)
        lines = []
        for entry in sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            if entry.is_symlink():
                try:
                    confine(root, str(entry.relative_to(root.resolve())))
                    note = " (link)"
                except PathRefused:
                    lines.append(f"{entry.name} (link out of the workspace: not followed)")
                    continue
            else:
                note = ""
            if entry.is_dir():
                lines.append(f"{entry.name}/{note}")
            else:
                lines.append(f"{entry.name}  {entry.stat().st_size:,} bytes{note}")
        return f"{_shown(root, target)}/\n" + ("\n".join(lines) if lines else "(empty)")

    def search_files(pattern: str, path: str = ".", glob: str = "*", max_results: int = 100) -> str:
        """Search the workspace's text files for a regular expression.

        Args:
            pattern: A Python regular expression.
            path: The folder to search, relative to the workspace root.
            glob: Only files whose name matches this pattern (e.g. '*.py').
            max_results: The most matching lines to return.
        """
        regex = check_pattern(pattern)
        base = confine(root, path)
        hits: list[str] = []
        scanned = 0
        for folder, dirs, files in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                if not fnmatch.fnmatch(name, glob):
                    continue
                file = Path(folder) / name
                try:
                    resolved = confine(root, str(file.relative_to(root.resolve())))
                    if _regular(resolved, name).st_size > MAX_FILE_BYTES:
                        continue
                    data = resolved.read_bytes()
                except (PathRefused, OSError, ValueError):
                    continue
                if b"\x00" in data[:8192]:
                    continue
                for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                    scanned += min(len(line), MAX_LINE_CHARS)
                    if scanned > MAX_SCAN_CHARS:
                        return "\n".join(
                            [*hits, f"[stopped after {MAX_SCAN_CHARS:,} characters searched]"]
                        )
                    if regex.search(line[:MAX_LINE_CHARS]):
                        hits.append(f"{_shown(root, file)}:{number}: {line[:300]}")
                        if len(hits) >= max_results:
                            return "\n".join([*hits, f"[stopped at {max_results} matches]"])
        return "\n".join(hits) if hits else f"no line matches {pattern!r}"

    meta = ToolMeta(tags=("files",), group="workspace")
    return [function_tool(f, meta=meta) for f in (read_file, list_dir, search_files)]


def shell_tool(root: Path, *, timeout: float = 120.0) -> FunctionTool:
    """``shell(command)``: run a command in ``root`` (needs approval for each command)."""
    root = Path(root)

    def shell(command: str) -> str:
        """Run a shell command in the workspace root and return its exit code and output.

        Args:
            command: The command line (run by /bin/sh).
        """
        proc = subprocess.run(
            command,
            shell=True,
            cwd=root,
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        parts = [f"exit code {proc.returncode}"]
        if out:
            parts.append("stdout:\n" + out.rstrip("\n"))
        if err:
            parts.append("stderr:\n" + err.rstrip("\n"))
        return "\n".join(parts)

    return function_tool(
        shell,
        meta=ToolMeta(
            tags=("shell",), group="workspace", requires_approval=True, timeout=timeout + 5
        ),
    )
