"""Helpers shared by the apps' REST APIs."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler


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


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "request_too_large"


def exception_handler(exc, context):
    """DRF's handler, plus a 413 for a body over DATA_UPLOAD_MAX_MEMORY_SIZE (Django raises
    RequestDataTooBig when DRF reads the body, which DRF alone would turn into a 500)."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = RequestTooLarge(f"The request body is larger than {limit} bytes.")
    return drf_exception_handler(exc, context)


class ApiRootView(APIView):
    """`/api/`: where to start (the schema, its docs, the main collections) instead of a 404."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        links = {
            "docs": "api:docs",
            "schema": "api:schema",
            "me": "api:me",
            "problems": "api:problems",
            "campaigns": "api:campaigns",
            "suites": "api:suites",
            "inbox": "api:inbox",
            "registry_artifacts": "api:registry-artifacts",
            "registry_regions": "api:registry-regions",
            "knowledge_entries": "api:knowledge-entries",
        }
        return Response(
            {name: request.build_absolute_uri(reverse(url)) for name, url in links.items()}
        )
