"""The user's own API tokens: create (shown once), list, revoke."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from statestore_admin.tokens.models import ApiToken


@require_http_methods(["GET", "POST"])
def api_tokens(request):
    new_token = None
    if request.method == "POST":
        if "revoke" in request.POST:
            token = get_object_or_404(ApiToken.objects.active(), pk=request.POST.get("revoke"), user=request.user)
            token.revoke()
            messages.success(request, f"Revoked token {token.prefix}….")
            return redirect("api-tokens")
        _, new_token = ApiToken.issue(request.user, request.POST.get("name", "").strip())
    tokens = ApiToken.objects.filter(user=request.user)
    return render(request, "tokens/index.html", {"tokens": tokens, "new_token": new_token})
