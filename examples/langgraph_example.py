"""LangChain v1 / LangGraph with ctxline: an agent middleware whose model input is ctxline's view.

Runs offline: a LangChain fake chat model replies. Each thread is its own ctxline
session; ctxline's search_history tool (brought by the middleware, answered on the
calling thread's session) finds what the conversation said before.

    python examples/langgraph_example.py
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxline import Context, MemoryStore, Preparation
from ctxline.integrations.langgraph import CtxlineMiddleware


class FakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, with the tool binding create_agent asks for."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def show(prep: Preparation) -> None:
    tokens = prep.report["tokens"]
    print(
        f"step {prep.header.step}: {tokens['total']} tokens, {len(prep.body['messages'])} messages"
    )


def main() -> None:
    store = MemoryStore()
    replies = iter(
        [
            AIMessage("Noted: your order number is 4471."),
            AIMessage(
                "",
                tool_calls=[
                    {"name": "search_history", "args": {"query": "order number"}, "id": "c1"}
                ],
            ),
            AIMessage("Your order number is 4471."),
        ]
    )
    middleware = CtxlineMiddleware(
        lambda thread: Context(store, f"thread-{thread}"), on_prepare=show
    )
    agent = create_agent(
        FakeModel(messages=replies),
        tools=[],  # the app's tools; the middleware brings ctxline's
        system_prompt="You are a shop assistant.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "1"}}
    agent.invoke({"messages": [{"role": "user", "content": "My order number is 4471."}]}, config)
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "What was my order number?"}]}, config
    )
    messages: list[BaseMessage] = state["messages"]
    print("search_history said:", str(messages[-2].content).splitlines()[0])
    print("final:", messages[-1].content)
    print("sessions:", [s.id for s in store.sessions()])


if __name__ == "__main__":
    main()
