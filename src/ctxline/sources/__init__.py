"""Context sources: the components that emit ``ctx-`` blocks and say how to read them.

State, rules, notifications, branch identity, the status bar, time, todo and dynamic
context are each a :class:`~ctxline.sources.base.Source`; an app adds its own the same way.

    from ctxline.sources.base import BaseSource, Block, SourceStep
"""
