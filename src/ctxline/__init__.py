"""ctxline: context engineering for LLM agents.

An agent appends what happens to a durable, append-only record; before each model
call ctxline prepares the exact request the model will see — stable cacheable prefix,
sourced state and scoped rules, escaped untrusted text — with a report of what it
chose and why, and can rebuild any logged request byte for byte.

    from ctxline import Context, UserMessage, open_store

    ctx = Context(open_store("ctxline.db"), "demo")
    ctx.append(UserMessage("Cancel my plan"))
    prep = ctx.prepare()
    prep.body          # the request body for the provider SDK
    prep.report        # tokens by section, budget, prefix reuse, pairing repairs
"""

import importlib
from typing import TYPE_CHECKING

from ctxline.context import Context, rebuild_request
from ctxline.errors import (
    BlobError,
    CompactionError,
    Conflict,
    ContextOverflow,
    CtxlineError,
    DuplicateEventId,
    IntegrityError,
    PairingError,
    TokenizerUnavailable,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.models.base import MissingExtra, ModelError
from ctxline.record.blobs import BlobStore
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    ModelUsage,
    Notification,
    Pending,
    RequestHeader,
    Rule,
    State,
    StoredEvent,
    SystemMessage,
    Todo,
    TodoItem,
    ToolCall,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.parse import event_from_json
from ctxline.record.store import (
    MemoryStore,
    SessionInfo,
    SQLiteStore,
    StorageError,
    Store,
    TimelineInfo,
    open_store,
)
from ctxline.render import (
    NeutralMessage,
    NeutralRequest,
    ToolSpec,
    render_bytes,
    to_anthropic,
    to_openai,
)
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark
from ctxline.sources.guide import GuideRegistry, MessageKind
from ctxline.sources.rules import valid_rules
from ctxline.sources.state import current_state
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.view.cache import ViewCache
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.prepare import Preparation, prepare

if TYPE_CHECKING:  # imported when first used (below): a Context alone never loads them
    from ctxline.discovery import Catalog, Discovery, load_catalog
    from ctxline.importers import FORMATS, ImportedSession, detect_format, load
    from ctxline.importers.ingest import ImportResult, import_sessions
    from ctxline.memory import Memory
    from ctxline.models.summarizer import SummaryFailed
    from ctxline.skills import Skills

_LAZY = {
    "Catalog": "ctxline.discovery",
    "Discovery": "ctxline.discovery",
    "load_catalog": "ctxline.discovery",
    "FORMATS": "ctxline.importers",
    "ImportedSession": "ctxline.importers",
    "detect_format": "ctxline.importers",
    "load": "ctxline.importers",
    "ImportResult": "ctxline.importers.ingest",
    "import_sessions": "ctxline.importers.ingest",
    "Memory": "ctxline.memory",
    "SummaryFailed": "ctxline.models.summarizer",
    "Skills": "ctxline.skills",
}
"""Names whose modules load on first use: discovery, importers, memory, the LLM
summarizer and skills bring YAML, difflib and their own folds, which a process that only
opens a Context and prepares never needs (its peak memory, issue 25)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "FORMATS",
    "AssistantMessage",
    "BlobError",
    "BlobStore",
    "BranchMark",
    "Catalog",
    "Compaction",
    "CompactionError",
    "Conflict",
    "Context",
    "ContextOverflow",
    "CtxlineError",
    "Discovery",
    "DuplicateEventId",
    "Event",
    "Guide",
    "GuideRegistry",
    "ImportResult",
    "ImportedSession",
    "IntegrityError",
    "Memory",
    "MemoryStore",
    "MessageKind",
    "MissingExtra",
    "ModelError",
    "ModelUsage",
    "NeutralMessage",
    "NeutralRequest",
    "Notification",
    "PairingError",
    "Pending",
    "Preparation",
    "PrepareOptions",
    "RequestHeader",
    "Rule",
    "SQLiteStore",
    "SessionInfo",
    "Skills",
    "Source",
    "State",
    "StepInputs",
    "StorageError",
    "Store",
    "StoredEvent",
    "SummaryFailed",
    "SystemMessage",
    "TimelineInfo",
    "Todo",
    "TodoItem",
    "TokenCounter",
    "TokenizerUnavailable",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Tools",
    "UnknownEvent",
    "UnknownSession",
    "UnknownTimeline",
    "UserMessage",
    "ValidationError",
    "ViewCache",
    "__version__",
    "canonical_json",
    "current_state",
    "detect_format",
    "event_from_json",
    "event_to_json",
    "get_counter",
    "import_sessions",
    "load",
    "load_catalog",
    "open_store",
    "prepare",
    "rebuild_request",
    "render_bytes",
    "to_anthropic",
    "to_openai",
    "valid_rules",
]
