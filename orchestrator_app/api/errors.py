"""REST errors: every error body is ``{"code": ..., "detail": ...}`` (+ ``fields`` for 400s)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import TooManyFieldsSent, TooManyFilesSent
from django.http import Http404
from django.http.multipartparser import MultiPartParserError
from django.utils.translation import gettext
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApiError(exceptions.APIException):
    """An error with a stable code. Raise ``ApiError(code, detail, status=...)``."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "ahentic_error"

    def __init__(self, code: str, detail: str, status_code: int = 400, fields=None):
        super().__init__(detail=detail, code=code)
        self.code = code
        self.status_code = status_code
        self.fields = fields


def session_not_found() -> ApiError:
    return ApiError("ahentic_session_not_found", gettext("Session not found."), 404)


def agent_not_found() -> ApiError:
    """An agent (or version) that does not exist, is inactive, or the user may not use."""
    return ApiError("ahentic_agent_not_found", gettext("Agent not found."), 404)


# DRF's own exceptions mapped to stable codes.
_DRF_CODES = {
    exceptions.NotAuthenticated: "ahentic_unauthenticated",
    exceptions.AuthenticationFailed: "ahentic_unauthenticated",
    exceptions.PermissionDenied: "ahentic_forbidden",
    exceptions.ParseError: "ahentic_invalid_json",
    exceptions.UnsupportedMediaType: "ahentic_unsupported_media_type",
    exceptions.MethodNotAllowed: "ahentic_method_not_allowed",
    exceptions.NotFound: "ahentic_not_found",
    exceptions.Throttled: "ahentic_throttled",
    exceptions.ValidationError: "ahentic_invalid_input",
}


def exception_handler(exc, context):
    from sessions_app.attachments import AttachmentError

    from ..errors import AhenticError

    if isinstance(exc, AhenticError | AttachmentError):
        return Response({"code": exc.code, "detail": exc.detail}, status=exc.status)
    if isinstance(exc, MultiPartParserError | TooManyFilesSent | TooManyFieldsSent):
        # Raised where Django reads a form body (the CSRF check of session authentication
        # does, before any parser): its HTML 400, or a 500, otherwise.
        return Response(
            {"code": "ahentic_upload_malformed", "detail": gettext("Malformed form: %s") % exc}, 400
        )
    if isinstance(exc, exceptions.ParseError) and str(exc.detail).startswith("Multipart"):
        return Response({"code": "ahentic_upload_malformed", "detail": str(exc.detail)}, 400)
    # Django's own exceptions carry no .detail; give them DRF's shape first.
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        body = {"code": exc.code, "detail": str(exc.detail)}
        if exc.fields:
            body["fields"] = exc.fields
    elif isinstance(exc, exceptions.ValidationError):
        body = {
            "code": "ahentic_invalid_input",
            "detail": gettext("Invalid input."),
            "fields": camel_keys(exc.detail),
        }
    else:
        code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), None)
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if isinstance(exc, exceptions.ParseError):
            detail = gettext("Malformed JSON body: %s") % exc.detail
        body = {"code": code or f"ahentic_{exc.default_code}", "detail": str(detail)}
    return Response(body, status=response.status_code, headers=_keep_headers(response))


def camel_keys(detail):
    """Field errors keyed as the request's fields are (``non_field_errors`` -> ``nonFieldErrors``)."""
    if not isinstance(detail, dict):
        return {"nonFieldErrors": detail}
    return {_camel(str(key)): value for key, value in detail.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def not_found_view(request, *args, **kwargs):
    """Unknown routes under the API's prefix: ``{code, detail}`` JSON, not Django's HTML page."""
    from django.http import JsonResponse

    return JsonResponse(
        {"code": "ahentic_not_found", "detail": gettext("No API route at %r.") % request.path},
        status=404,
    )


def _keep_headers(response) -> dict:
    return {k: v for k, v in response.items() if k in ("WWW-Authenticate", "Retry-After", "Allow")}
