"""Small mistakes in a form answer with a message, never a 500, and change nothing: an over-long or
impossible time zone (``tz``) on the expiry and add-key forms, a token to revoke that is not an id."""

from datetime import UTC, datetime

import pytest

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
# Each of these made ZoneInfo read the file system: too long a name, a directory, a file that is not a zone.
BAD_ZONES = ["A" * 300, "Europe/" + "x" * 300, "Europe", "zone.tab", "right/UTC", "Nowhere/Atlantis"]


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl")
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key="k", value=1)
    return {"run": run, "key": key}


@pytest.fixture
def pages(client, operator):
    client.force_login(operator)
    return client


def state():
    return sorted(TaskStateStore.objects.values_list("id", "key", "value", "expires_at", "updated_at"))


@pytest.mark.parametrize("zone", BAD_ZONES, ids=lambda z: z[:12])
def test_an_impossible_time_zone_on_the_expiry_form_is_422(pages, scene, zone):
    before = state()
    response = pages.post(
        f"/keys/task/{scene['key'].pk}/expiry/",
        {"expiry": "at", "expires_at": "2030-01-01T10:00", "tz": zone},
        **HX,
    )
    assert response.status_code == 422
    text = response.content.decode()
    assert "Unknown time zone" in text and 'name="expires_at"' in text  # the form again, with its message
    message = text[text.index("Unknown time zone") :].split("reload the page")[0]
    assert len(message) < 100  # a huge name is cut short in the message
    assert state() == before


@pytest.mark.parametrize("zone", BAD_ZONES, ids=lambda z: z[:12])
def test_an_impossible_time_zone_on_the_add_key_form_is_422(pages, scene, zone):
    before = state()
    form = {"key": "new", "value": "1", "map_index": -1, "expiry": "at", "expires_at": "2030-01-01T10:00", "tz": zone}
    response = pages.post(f"/runs/{scene['run'].pk}/tasks/t/add/", form, **HX)
    assert response.status_code == 422
    assert "Unknown time zone" in response.content.decode()
    assert state() == before


def test_a_known_time_zone_still_reads_the_picked_time_in_it(pages, scene):
    response = pages.post(
        f"/keys/task/{scene['key'].pk}/expiry/",
        {"expiry": "at", "expires_at": "2030-01-01T10:00", "tz": "Asia/Tokyo"},
        **HX,
    )
    assert response.status_code == 204
    assert TaskStateStore.objects.get(pk=scene["key"].pk).expires_at == datetime(2030, 1, 1, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize("revoke", ["abc", "", "  ", "1.5", "-1", "٣", "9" * 40])
def test_revoking_something_that_is_not_a_token_id_changes_nothing(pages, operator, revoke):
    record, _ = ApiToken.issue(operator, "kept")
    response = pages.post("/account/tokens/", {"revoke": revoke}, follow=True)
    assert response.status_code in (200, 404)
    if response.status_code == 200:
        assert "Nothing revoked" in response.content.decode()
    record.refresh_from_db()
    assert record.revoked_at is None and ApiToken.objects.count() == 1


def test_options_on_the_api_docs_is_json_405(client, operator):
    """The Swagger page has no template for DRF's OPTIONS metadata: that was a 500."""
    client.force_login(operator)
    client.raise_request_exception = False
    response = client.options("/api/docs/")
    assert response.status_code == 405 and response["Content-Type"].startswith("application/json")
    assert client.get("/api/docs/").status_code == 200
