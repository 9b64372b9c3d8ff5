"""Where a persistent shell is after a command: ``cd``, ``pushd`` and ``popd`` followed.

The status bar shows the agent's working directory (seed 001). Shell tools run in one
persistent shell for many agents, so the directory moves with every top-level ``cd``;
a target that cannot be known statically (``$VAR``, backquotes, globs) makes the cwd
unknown rather than wrong.

    >>> follow_cd("/repo", "cd src && ls")
    '/repo/src'
"""

from __future__ import annotations

import posixpath
import re
import shlex

__all__ = ["follow_cd"]

_PUNCT = "();<>|&\n"
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_LEADING = frozenset({"then", "do", "else", "{", "!", "time"})
_UNSAFE = re.compile(r"[$`*?\[]|^~[^/]")


def _drop_heredocs(command: str) -> str:
    out: list[str] = []
    delimiter: str | None = None
    for line in command.replace("\\\n", " ").split("\n"):
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        match = _HEREDOC.search(line)
        if match:
            delimiter = match.group(2)
        out.append(line)
    return "\n".join(out)


def _commands(command: str) -> list[list[str]]:
    """The simple commands whose ``cd`` would change the shell's directory, in order."""
    lexer = shlex.shlex(_drop_heredocs(command), posix=True, punctuation_chars=_PUNCT)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: give up on this command
        return []
    found: list[list[str]] = []
    words: list[str] = []
    depth, after_pipe, skip_next = 0, False, False
    for tok in tokens:
        if tok and all(ch in _PUNCT for ch in tok):
            if "<" in tok or ">" in tok:  # a redirection: drop it and its target
                skip_next = True
                continue
            piped = "|" in tok.replace("||", "")
            background = "&" in tok.replace("&&", "")
            if words and depth == 0 and not after_pipe and not piped and not background:
                found.append(words)
            words = []
            depth = max(0, depth + tok.count("(") - tok.count(")"))
            after_pipe = piped
            continue
        if skip_next:
            skip_next = False
            continue
        if not words and tok in _LEADING:
            continue
        words.append(tok)
    if words and depth == 0 and not after_pipe:
        found.append(words)
    return found


def _target(cwd: str | None, path: str) -> str | None:
    if not path or _UNSAFE.search(path):
        return None
    if path.startswith(("/", "~")):
        return posixpath.normpath(path)
    if cwd is None:
        return None
    return posixpath.normpath(posixpath.join(cwd, path))


def follow_cd(cwd: str | None, command: str, stack: list[str | None] | None = None) -> str | None:
    """The working directory after ``command`` ran in a persistent shell at ``cwd``.

    Follows top-level ``cd``, ``pushd`` and ``popd`` (``cd X && …``, ``cd X; …``, relative
    paths, ``..``, ``~``); ignores them in subshells, pipelines and background jobs, and
    ignores ``cd -``. A target with ``$``, backquotes or globs makes the cwd unknown (None).
    Commands are assumed to succeed. ``stack`` is the ``pushd`` stack, updated in place.
    """
    stack = stack if stack is not None else []
    for words in _commands(command):
        name, args = words[0], [w for w in words[1:] if not w.startswith("-") or w == "-"]
        if "--" in words[1:]:
            args = words[words.index("--") + 1 :]
        if name == "cd":
            if not args:
                cwd = "~"
            elif args[0] != "-":
                cwd = _target(cwd, args[0])
        elif name == "pushd" and args and args[0] != "-":
            stack.append(cwd)
            cwd = _target(cwd, args[0])
        elif name == "popd":
            cwd = stack.pop() if stack else None
    return cwd
