"""A file the pages hand to the browser (an export, the keys a confirmation is about to delete), and the
plain-text 400 a download's bad parameters get: a browser shows it as is, with no page around it."""

from django.core.exceptions import ValidationError
from django.http import HttpResponseBadRequest, StreamingHttpResponse

from statestore_admin.dashboard.http.htmx import error_messages
from statestore_admin.exports import documents as exports


def download(pieces, filename: str, content_type: str) -> StreamingHttpResponse:
    """``pieces`` streamed as an attachment. Never cached: a download may hold values."""
    response = StreamingHttpResponse(pieces, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def export_download(export: exports.Export, format: str) -> StreamingHttpResponse:
    """An export in ``format`` (json or csv), named by the export (``Export.filename``)."""
    return download(export.stream(format), export.filename(format), exports.CONTENT_TYPES[format])


def bad_request(exc: ValidationError) -> HttpResponseBadRequest:
    return HttpResponseBadRequest("; ".join(error_messages(exc)), content_type="text/plain; charset=utf-8")
