"""ctxline's own tools as (spec, handler) pairs, and the detailed errors of failed calls.

    from ctxline.tools.builtin import BUILTIN_TOOLS
"""
