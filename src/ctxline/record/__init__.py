"""The record: event value types, their canonical JSON, storage, blobs, and the one writer.

Nothing here knows how a request is built: the view (:mod:`ctxline.view`) reads the
record, the record never reads the view.

    from ctxline.record.events import UserMessage
    from ctxline.record.timeline import TimelineWriter
"""
