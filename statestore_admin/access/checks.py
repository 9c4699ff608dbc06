"""System checks of the access settings (``manage.py check``, and at every start)."""

from django.conf import settings
from django.core import checks

TOKEN_IDP_MAX_AGE_LIMIT = 10 * 365 * 24 * 3600


@checks.register("statestore")
def check_access_settings(app_configs=None, **kwargs):
    """DEFAULT_SCOPE and TOKEN_IDP_MAX_AGE (docs/access.md, docs/sign-in.md)."""
    from statestore_admin.access import scopes

    errors = [
        checks.Error(
            problem, hint="Set DEFAULT_SCOPE to *, or to glob patterns separated by commas.", id="statestore.E060"
        )
        for problem in scopes.default_scope_problems()
    ]
    age = settings.TOKEN_IDP_MAX_AGE
    # At most ten years: a bound far beyond it would carry "until when access lasts" past the calendar's end (a 500
    # for every request of such an account) while meaning no bound at all.
    if not isinstance(age, int) or isinstance(age, bool) or not 1 <= age <= TOKEN_IDP_MAX_AGE_LIMIT:
        errors.append(
            checks.Error(
                f"TOKEN_IDP_MAX_AGE is {age!r}: it must be a whole number of seconds, from 1 to "
                f"{TOKEN_IDP_MAX_AGE_LIMIT} (ten years).",
                hint="Set it to how long access lasts after the last sign-in at the provider, e.g. 86400 (a day).",
                id="statestore.E061",
            )
        )
    return errors
