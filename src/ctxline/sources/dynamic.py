"""Dynamic context (seed 003): state the app gives for this request only.

The app's callback is called once per request, before the step is planned; its items are
never reused from an earlier step and never written to the record (they are in the
request log, so the request can be rebuilt). An empty result is said explicitly, never
"the last value again". Optional items are the first to go under pressure.

    Context(store, "s", dynamic=lambda: [DynamicItem("cart", "2 items, 31.50 EUR")])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxline.sources.base import BaseSource, Block, DynamicItem, SourceStep, StepContext, TailItem
from ctxline.sources.guide import MessageKind

__all__ = ["DYNAMIC_KIND", "NO_APP_STATE", "DynamicCallback", "DynamicSource", "render_dynamic"]

NO_APP_STATE = "no app state provided this step"

DYNAMIC_KIND = MessageKind(
    "ctx-dynamic",
    "state the app provides for this request only (id names the item)",
    "It is current now; it is not kept in history and is given again when it still applies.",
)

DynamicCallback = Callable[[], Sequence[DynamicItem]]


def _item(item: DynamicItem) -> TailItem:
    text = Block("ctx-dynamic", item.text, (("id", item.id),)).render()
    return TailItem(item.id, text, item.required, item.priority)


def render_dynamic(items: Sequence[DynamicItem]) -> str:
    if not items:
        return Block("ctx-dynamic", NO_APP_STATE).render()
    return "\n".join(_item(item).text for item in items)


class DynamicSource(BaseSource):
    """Shows the step's dynamic items (``StepContext.dynamic``) in the tail."""

    name = "dynamic"

    def kinds(self) -> Sequence[MessageKind]:
        return (DYNAMIC_KIND,)

    def step(self, fold: object, ctx: StepContext) -> SourceStep:
        items = ctx.dynamic
        if not items:
            return SourceStep(tail=(TailItem("", render_dynamic(())),), meta={"items": []})
        return SourceStep(tail=tuple(_item(i) for i in items), meta={"items": [i.id for i in items]})
