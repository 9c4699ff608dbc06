"""The domain layer's exceptions. Selectors and services raise these; each face maps them to its own
answer (the API: Airflow's JSON error shape with 404 / 409 / 422 / 403; the pages: an error page, a
toast or messages next to form fields). Nothing in the domain layer knows about HTTP.
"""

from django.core.exceptions import PermissionDenied, ValidationError


class NotFound(Exception):
    """What was addressed does not exist (any more). The message says what, in words a user understands."""


class Conflict(Exception):
    """The change would overwrite something written meanwhile; ``details`` carries what each side holds."""

    def __init__(self, message: str, details: list | None = None):
        super().__init__(message)
        self.details = details or []


class Invalid(ValidationError):
    """Bad input: ``{field: message}`` like Django's ValidationError (whose codes the faces use)."""


class Forbidden(PermissionDenied):
    """The actor lacks a permission."""


class Unaddressable(Exception):
    """Coordinates that name no single task instance: they contradict each other, or leave a choice open
    (a task in a loop addressed without its region and index). Airflow's API answers 400, not 422: the
    parameters are well formed."""


class Ambiguous(Conflict):
    """Coordinates that match several current executions (Airflow's ``AmbiguousProducerError``)."""
