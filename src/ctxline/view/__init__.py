"""The view: planning a step and rendering the exact request, purely, from the record.

Nothing here opens a store: events come in as values, and what a step appends goes out
as a plan (:func:`ctxline.view.step.plan_step`) for the writer.

    from ctxline.view.step import plan_step
"""
