"""The API's bearer tokens: ``tokens.authentication``'s checks of the token itself, then the domain's of its owner.

A token acts with the roles and scope its owner has at each request. Those of an account that single sign-on or
the proxy manages were set at its last sign-in there, so its tokens work only while that sign-in is recent
(``state.sign_in.lapsed``, ``TOKEN_IDP_MAX_AGE``); a local account's work as long as the token is valid.
"""

from statestore_admin.state import sign_in
from statestore_admin.tokens import authentication


class BearerTokenAuthentication(authentication.BearerTokenAuthentication):
    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None and sign_in.lapsed(found[0]):
            raise authentication.OwnerSignInLapsed()
        return found
