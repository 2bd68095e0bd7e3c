"""Logging filters for the site (configured in settings.LOGGING)."""

import logging


class QuietForbidden(logging.Filter):
    """A refused request is expected traffic: log its one line, not the PermissionDenied
    traceback Django attaches (every 403 filled the log with a stack)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
