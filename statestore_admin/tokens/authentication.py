from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import authentication, exceptions

from statestore_admin import throttling
from statestore_admin.tokens.models import ApiToken, digest, presented

LAST_USED_EVERY = timedelta(minutes=1)  # write last_used_at at most this often
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class TokenExpired(exceptions.AuthenticationFailed):
    """401 that says so (``api.errors`` answers any other authentication failure "Not authenticated")."""

    default_detail = gettext_lazy("Token expired")
    default_code = "token_expired"


class OwnerSignInLapsed(exceptions.AuthenticationFailed):
    """401 for a token whose owner single sign-on manages and has not signed in there recently (the API face
    asks the domain: ``api.authentication``)."""

    default_detail = gettext_lazy(
        "The token's owner has not signed in through single sign-on recently: sign in to the dashboard"
    )
    default_code = "token_owner_sign_in_lapsed"


class ReadOnlyToken(exceptions.PermissionDenied):
    """403 for a write with a read-only token."""

    default_detail = gettext_lazy("This API token is read-only")
    default_code = "token_read_only"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``, as Airflow's API and its Python client send it."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid bearer token header."))
        try:
            token = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(_("Invalid bearer token.")) from None
        record = presented(digest(token))
        if record is None or not record.user.is_active:
            # Only a wrong token asks the throttle (429 once too many from this address failed), so a valid one
            # costs no cache read and no neighbour behind the same address can lock a script out (throttling.py).
            throttling.check_token_failures(request)
            throttling.record_token_failure(request)
            raise exceptions.AuthenticationFailed(_("Invalid or revoked token."))
        now = timezone.now()
        if record.expires_at <= now:
            raise TokenExpired()
        if record.read_only and request.method not in SAFE_METHODS:
            raise ReadOnlyToken()
        if record.last_used_at is None or now - record.last_used_at > LAST_USED_EVERY:
            ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
        return record.user, record

    def authenticate_header(self, request):
        return self.keyword
