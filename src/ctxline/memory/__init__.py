"""Memory across sessions, on every store backend: remember, search, read, forget, supersede.

See :mod:`ctxline.memory.source` and ``docs/memory.md``.

    from ctxline.memory import Memory
    memory = Memory(open_store("agent.db"), user="mia", project="shop")
    memory.remember("Deploys run with make release", key="deploy")
"""

from ctxline.memory.source import MEMORY_KIND, Memory, describe
from ctxline.record.store.memories import (
    SCOPES,
    MemoryBackend,
    MemoryEntry,
    MemoryHit,
    NewMemory,
    Scope,
)

__all__ = [
    "MEMORY_KIND",
    "SCOPES",
    "Memory",
    "MemoryBackend",
    "MemoryEntry",
    "MemoryHit",
    "NewMemory",
    "Scope",
    "describe",
]
