"""Who someone is: user names and their look-alikes (``usernames``), the roles an account holds
(``roles``), how a session signed in and how long an identity provider's word counts (``sign_in``), and
single-use break-glass links (``break_glass``), with their system checks (``checks``). The HTTP side of
signing in (OpenID Connect, proxy headers) is ``statestore_admin.sso``; API tokens are
``statestore_admin.tokens``. It imports ``core`` and ``records``."""
