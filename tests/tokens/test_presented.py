"""The token a request presents is read in one plain statement (``tokens.models.presented``): the token and its
owner as the ORM would give them, none once revoked, and the owner's latest sign-in from outside the same way
(``identity.sign_in.latest_link``)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from statestore_admin.identity import sign_in
from statestore_admin.records.models import ExternalIdentity
from statestore_admin.tokens.models import ApiToken, digest, presented

pytestmark = pytest.mark.django_db


def fields(row) -> dict:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def test_the_token_and_its_owner_are_the_orms(operator):
    record, token = ApiToken.issue(operator, "scripts", read_only=True)
    ApiToken.objects.filter(pk=record.pk).update(last_used_at=timezone.now())
    found = presented(digest(token))
    expected = ApiToken.objects.active().select_related("user").get(digest=digest(token))
    assert fields(found) == fields(expected)
    assert fields(found.user) == fields(expected.user)
    assert found.read_only is True and found.expires_at.tzinfo is not None and not found._state.adding
    assert found.user.has_perm("state.view_taskstatestore") == expected.user.has_perm("state.view_taskstatestore")


def test_a_revoked_or_unknown_token_is_none(operator):
    record, token = ApiToken.issue(operator)
    assert presented(digest("ssa_unknown")) is None
    record.revoke("tests")
    assert presented(digest(token)) is None


def test_the_latest_sign_in_from_outside_is_the_orms(operator):
    assert sign_in.latest_link(operator) is None
    now = timezone.now()
    for n, groups in enumerate((["old"], ["new", "é"])):
        when = now + timedelta(days=n)
        ExternalIdentity.objects.create(
            user=operator, method="oidc", provider="idp", subject=f"s{n}", groups=groups, last_sign_in=when
        )
    link = sign_in.latest_link(operator)
    assert fields(link) == fields(ExternalIdentity.objects.filter(user=operator).order_by("-last_sign_in").first())
    assert link.groups == ["new", "é"]
