"""API tokens moved from the API app to their own (``tokens``): same table, rows and permissions kept."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIRequestFactory

from statestore_admin.tokens.authentication import BearerTokenAuthentication
from statestore_admin.tokens.models import ApiToken, digest

OLD_LAYOUT = [("api", "0001_initial"), ("tokens", None)]  # before the move: the model in the API app


def migrate(targets):
    executor = MigrationExecutor(connections["default"])
    executor.migrate(targets)
    executor.loader.build_graph()  # what is applied now
    ContentType.objects.clear_cache()
    return executor.loader


def latest(loader, *app_labels):
    return [node for node in loader.graph.leaf_nodes() if node[0] in app_labels]


def test_the_model_keeps_the_api_apps_table():
    assert ApiToken._meta.app_label == "tokens"
    assert ApiToken._meta.db_table == "api_apitoken"


@pytest.mark.django_db
def test_content_type_is_the_tokens_apps():
    assert ContentType.objects.get_for_model(ApiToken).app_label == "tokens"
    assert not ContentType.objects.filter(app_label="api", model="apitoken").exists()


@pytest.mark.django_db
def test_no_missing_migrations():
    """``makemigrations --check`` for the two apps involved (others may have migrations of their own under way)."""
    call_command("makemigrations", "api", "tokens", check=True, dry_run=True, stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_migrating_from_the_old_layout_keeps_tokens_and_permissions():
    loader = migrate(OLD_LAYOUT)
    old_apps = loader.project_state(OLD_LAYOUT[:1]).apps
    assert ("tokens", "0001_initial") not in loader.applied_migrations
    assert ("api", "0002_move_apitoken_to_tokens") not in loader.applied_migrations
    # The reverse migration gave the content type back to the API app, as it was before the move.
    old_type = ContentType.objects.get(app_label="api", model="apitoken")
    assert not ContentType.objects.filter(app_label="tokens", model="apitoken").exists()

    user = get_user_model().objects.create_user("alice", password="pw-for-tests")
    user.user_permissions.add(Permission.objects.get(content_type=old_type, codename="view_apitoken"))
    token = "ssa_written-before-the-move"
    old_apps.get_model("api", "ApiToken").objects.create(
        user_id=user.pk, name="old", prefix=token[:12], digest=digest(token)
    )

    loader = migrate(latest(loader, "api", "tokens"))
    assert ("tokens", "0001_initial") in loader.applied_migrations
    assert ("api", "0002_move_apitoken_to_tokens") in loader.applied_migrations

    record = ApiToken.objects.get()
    assert (record.name, record.prefix, record.user_id) == ("old", token[:12], user.pk)
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert BearerTokenAuthentication().authenticate(request) == (user, record)

    # The same content type row (its id, so every permission and admin log entry) now names the tokens app.
    assert ContentType.objects.get_for_model(ApiToken).pk == old_type.pk
    assert not ContentType.objects.filter(app_label="api", model="apitoken").exists()
    assert get_user_model().objects.get(pk=user.pk).has_perm("tokens.view_apitoken")
