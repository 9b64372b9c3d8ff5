"""ctxline inside the agent frameworks people already use (see docs/integrations.md).

Each integration records the framework's history into a ctxline timeline, prepares the
view and hands it back in the framework's own types; none is imported here, so each
needs only its own extra:

- :mod:`ctxline.integrations.agents_sdk` — OpenAI Agents SDK ``Session`` and
  ``call_model_input_filter`` (``pip install 'ctxline[agents]'``);
- :mod:`ctxline.integrations.pydantic_ai` — Pydantic AI capability and history
  processor (``[pydantic-ai]``);
- :mod:`ctxline.integrations.langgraph` — LangGraph pre-model hook and LangChain v1
  agent middleware (``[langgraph]``);
- :mod:`ctxline.integrations.mcp_server` — ``ctxline mcp``, ctxline's tools over MCP
  (``[mcp]``).

    from ctxline.integrations.pydantic_ai import CtxlineCapability
"""

from __future__ import annotations

__all__: list[str] = []
