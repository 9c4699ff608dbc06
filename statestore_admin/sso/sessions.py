"""A single sign-on session ends once its account has not signed in at the provider for ``TOKEN_IDP_MAX_AGE``
(``identity.sign_in.session_lapsed``): someone removed at the provider who never signs in again does not keep an open
session. The person is signed out; the request goes on anonymous, so a page sends them to the login page and the API
answers 401. Behind the proxy, which vouches at every request, ``sso.proxy`` signs the person in again well before.
"""

from __future__ import annotations

import logging

from django.contrib.auth import logout

from statestore_admin.identity import sign_in
from statestore_admin.sso.proxy import bearer_api_request

log = logging.getLogger(__name__)


class SingleSignOnSessionMiddleware:
    """After ``AuthenticationMiddleware`` and ``ProxySignInMiddleware``, before ``LoginRequiredMiddleware``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        # A call with a bearer token does not use the session (its token's owner is rechecked instead:
        # api.authentication); the session's next request ends it.
        if not bearer_api_request(request) and sign_in.session_lapsed(request):
            log.info(
                "session of %s ended: no sign-in through single sign-on or the proxy for %s s (TOKEN_IDP_MAX_AGE)",
                request.user.get_username(),
                int(sign_in.max_age().total_seconds()),
            )
            logout(request)
        return self.get_response(request)
