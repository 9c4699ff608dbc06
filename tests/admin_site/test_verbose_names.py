"""Django admin names our models as people write them (issue 23, item 15): "API tokens", "GC runs"."""

import pytest

from ..conftest import BOTH_DATABASES


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_the_admin_index_says_api_tokens_and_gc_runs(client, user_factory):
    client.force_login(user_factory("admin", is_staff=True, is_superuser=True))
    html = client.get("/admin/").content.decode()
    for name in ("API tokens", "GC runs", "Statistics snapshots"):
        assert f">{name}</a>" in html, name
    for wrong in ("Api tokens", "Gc runs", "Stats snapshots"):
        assert wrong not in html, wrong
    assert "Select GC run to view" in client.get("/admin/state/gcrun/").content.decode()
