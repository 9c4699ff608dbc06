"""The user's own API tokens: create (shown once, after a redirect), list, revoke (after a confirmation)."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET, require_http_methods

from statestore_admin.tokens.models import ApiToken

LIFETIMES = (30, 90, 365)  # days offered on the page, capped at API_TOKEN_MAX_AGE_DAYS
NEW_TOKEN = "tokens.new_token"  # session key: the token just created, shown once by the GET that follows


def lifetimes() -> list[int]:
    cap = settings.API_TOKEN_MAX_AGE_DAYS
    days = [d for d in LIFETIMES if d < cap]
    return [*days, cap]


@require_http_methods(["GET", "POST"])
def api_tokens(request):
    if request.method == "POST":
        if "revoke" in request.POST:
            pk = request.POST.get("revoke", "").strip()
            if not pk.isascii() or not pk.isdigit():  # not a token's id: there is nothing to look up
                messages.error(request, "Nothing revoked: choose the token to revoke in the list below.")
                return redirect("api-tokens")
            token = get_object_or_404(ApiToken.objects.active(), pk=int(pk), user=request.user)
            token.revoke(f"revoked by {request.user.get_username()}")
            messages.success(request, f"Revoked token {token.prefix}….")
            return redirect("api-tokens")
        choices = lifetimes()
        try:
            days = int(request.POST.get("expires_in_days") or choices[-1])
        except ValueError:
            days = -1
        if days not in choices:
            messages.error(request, f"Choose a lifetime of {', '.join(map(str, choices))} days.")
            return redirect("api-tokens")
        _, token = ApiToken.issue(
            request.user,
            request.POST.get("name", "").strip(),
            expires_in=timedelta(days=days),
            read_only=bool(request.POST.get("read_only")),
        )
        request.session[NEW_TOKEN] = token
        return redirect("api-tokens")
    new_token = request.session.pop(NEW_TOKEN, None)
    tokens = ApiToken.objects.filter(user=request.user)
    response = render(
        request,
        "tokens/index.html",
        {"tokens": tokens, "new_token": new_token, "lifetimes": lifetimes()},
    )
    if new_token:  # never written to the browser's cache: Back or a reopened tab asks the server, which forgot it
        patch_cache_control(response, no_store=True)
    return response


@require_GET
def revoke_api_token(request, pk):
    token = get_object_or_404(ApiToken.objects.active(), pk=pk, user=request.user)
    return render(request, "tokens/revoke.html", {"token": token})
