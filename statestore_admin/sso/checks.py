"""System checks of the single sign-on settings (``manage.py check``, and at every start): a half-configured
OpenID Connect sign-in fails loudly at start rather than at the first person's sign-in."""

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks

HINT = "docs/sign-in.md, OpenID Connect: the settings and a recipe for each provider."


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@checks.register("statestore")
def check_oidc(app_configs=None, **kwargs):
    issuer = settings.OIDC_ISSUER
    if not issuer:
        if settings.OIDC_CLIENT_ID or settings.OIDC_CLIENT_SECRET:
            return [
                checks.Warning(
                    "OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is set but OIDC_ISSUER is not: OpenID Connect sign-in "
                    "is off.",
                    hint="Set OIDC_ISSUER to the provider's issuer URL to turn it on. " + HINT,
                    id="statestore.W040",
                )
            ]
        return []
    found = []
    missing = [name for name in ("OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET") if not getattr(settings, name)]
    if missing:
        found.append(
            checks.Error(
                f"OIDC_ISSUER is set but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not.",
                hint="Register the dashboard with the provider as a confidential web application and set both. " + HINT,
                id="statestore.E040",
            )
        )
    parts = urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        found.append(
            checks.Error(
                f"OIDC_ISSUER {issuer!r} is not an issuer URL.",
                hint="The https:// URL the provider names as its issuer, e.g. https://login.example.com/realms/ops. "
                + HINT,
                id="statestore.E041",
            )
        )
    elif parts.scheme == "http" and not _loopback(parts.hostname):
        found.append(
            checks.Error(
                f"OIDC_ISSUER {issuer!r} is plain http: the client secret and the tokens would cross the network "
                "unencrypted.",
                hint="Use the provider's https:// issuer (plain http is accepted on loopback only, for tests).",
                id="statestore.E042",
            )
        )
    if "openid" not in settings.OIDC_SCOPES:
        found.append(
            checks.Error(
                f"OIDC_SCOPES {' '.join(settings.OIDC_SCOPES)!r} lacks 'openid': the provider would send no ID token.",
                hint="The default is 'openid email profile groups'.",
                id="statestore.E043",
            )
        )
    if not settings.OIDC_GROUP_ROLES and not settings.OIDC_GROUP_SCOPES:
        found.append(
            checks.Warning(
                "OIDC_ISSUER is set but OIDC_GROUP_ROLES and OIDC_GROUP_SCOPES map no group: everyone who signs in "
                "through the provider gets the no-access page.",
                hint="Map the provider's groups to roles, e.g. OIDC_GROUP_ROLES='airflow-ops=Operator'. " + HINT,
                id="statestore.W041",
            )
        )
    if settings.OIDC_TIMEOUT <= 0:
        found.append(
            checks.Error(
                f"OIDC_TIMEOUT is {settings.OIDC_TIMEOUT}: it must be a positive number of seconds.",
                hint="The default is 5: how long a sign-in waits for each request to the provider.",
                id="statestore.E044",
            )
        )
    return found


@checks.register("statestore")
def check_fail_closed_scopes(app_configs=None, **kwargs):
    """An account from single sign-on or the proxy sees only what a scope group (or a grant) gives it, nothing
    without one unless DEFAULT_SCOPE says otherwise (docs/access.md): with roles mapped and no scope group nor
    default, everyone who signs in sees no DAG at all, which is worth saying at start."""
    if not (settings.OIDC_ISSUER or settings.TRUSTED_PROXY_ADDRESSES):
        return []
    if not settings.OIDC_GROUP_ROLES or settings.OIDC_GROUP_SCOPES or settings.DEFAULT_SCOPE:
        return []
    return [
        checks.Warning(
            "OIDC_GROUP_ROLES gives roles but OIDC_GROUP_SCOPES maps no scope group and DEFAULT_SCOPE is empty: "
            "accounts that sign in through single sign-on or the proxy see no DAG and no asset until an "
            "administrator grants them a scope.",
            hint="Map the provider's groups to scope groups (OIDC_GROUP_SCOPES), or set DEFAULT_SCOPE=* for every "
            "DAG and asset (docs/access.md, Scopes).",
            id="statestore.W042",
        )
    ]
