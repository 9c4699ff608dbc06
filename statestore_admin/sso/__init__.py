"""Signing in from outside: single sign-on through an OpenID Connect provider (``oidc``) and an
authenticating proxy's trusted headers (``proxy``), and the end of a single sign-on session past
``TOKEN_IDP_MAX_AGE`` (``sessions``). Both hand the person the provider or proxy vouched for
to ``identity.sign_in.sign_in_identity``, which owns the group mapping; this package holds only the HTTP side
(redirects, callbacks, headers) and shares the layer of ``tokens`` and ``web``: the faces may use it, it
uses none of them.
"""
