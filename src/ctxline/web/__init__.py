"""Pages for people: the HTML reports of ``replay`` and ``eval`` (and the inspector).

    from ctxline.web.report_html import write_report
"""
