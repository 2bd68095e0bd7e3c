"""Helpers shared by the apps' REST APIs."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import ValidationError


def service_call(fn, *, passthrough: tuple[type[Exception], ...] = (), **kwargs):
    """Run a service; its ValidationError becomes a 400 naming the field. Exceptions in
    `passthrough` (subclasses the caller answers itself) are raised unchanged."""
    try:
        return fn(**kwargs)
    except passthrough:
        raise
    except DjangoValidationError as exc:
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        raise ValidationError(detail) from exc
