"""Pages for people. The inspector: ``ctxline serve`` (a read-only local web app over a record), the charts it
shares with the replay report and ``doctor --cache --html``, and the read-only record reader.

Needs the ``web`` extra (Starlette, Jinja2, uvicorn) for the app; the charts and the
replay report need nothing.

    from ctxline.web.record import open_record
    from ctxline.web.app import create_app
    app = create_app(open_record("ctxline.db"))
"""

__all__: list[str] = []
