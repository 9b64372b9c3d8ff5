"""Token counting: exact tiktoken encodings loaded offline, an estimator, memoized counts.

    from ctxline.tokens.counters import get_counter
"""
