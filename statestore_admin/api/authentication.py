"""The API's bearer tokens: ``tokens.authentication``'s checks of the token itself, then the domain's of its owner.

A token acts with the roles and scope its owner has at each request. Those of an account that single sign-on or
the proxy manages are what its last sign-in there mapped to, and its tokens work only while that sign-in is recent
(``identity.sign_in.recheck``, ``TOKEN_IDP_MAX_AGE``); a local account's work as long as the token is valid.
"""

from statestore_admin.identity import sign_in
from statestore_admin.tokens import authentication


class BearerTokenAuthentication(authentication.BearerTokenAuthentication):
    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None and not sign_in.recheck(found[0]):
            raise authentication.OwnerSignInLapsed()
        return found
