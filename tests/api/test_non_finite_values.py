"""Values that strict JSON cannot carry (issue 36, item 3): Airflow's ``json.dumps`` writes NaN and Infinity, and a
person may write 1e400 (too large for a float) by hand. Every answer that holds the value (Airflow's API, ours, the
GC preview, the export files) stays strict JSON and answers 200 with the value's text: it answered 500 ("Out of
range float values are not JSON compliant"), and the export files held NaN and Infinity, which strict parsers
refuse."""

import json

import pytest
from django.db import connections

from tests.conftest import BOTH_DATABASES

TEXTS = ["NaN", "Infinity", "1e400", '{"a": [1, -Infinity], "b": 1e999}']


def strict(body: bytes):
    def refuse(name):
        raise ValueError(f"{name} in an answer")

    return json.loads(body, parse_constant=refuse)


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_values_beyond_json_are_answered_as_their_text(
    client, operator, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory
):
    client.force_login(operator)
    run = dag_run_factory(dag_id="etl", run_id="manual_1")
    task_instance_factory(run, task_id="t")
    asset = asset_factory(name="orders")
    for i, text in enumerate(TEXTS):
        key = task_key_factory(run, task_id="t", key=f"k{i}")
        asset_key_factory(asset, key=f"k{i}")
        with connections["airflow"].cursor() as cursor:  # as Airflow's json.dumps or a person writes it
            cursor.execute("UPDATE task_state_store SET value = %s, expires_at = NULL WHERE id = %s", [text, key.pk])
            cursor.execute(
                "UPDATE asset_state_store SET value = %s WHERE asset_id = %s AND key = %s", [text, asset.pk, f"k{i}"]
            )
    task = "/api/v2/dags/etl/dagRuns/manual_1/taskInstances/t/state-store"
    answers = {
        task: None,
        f"/api/v2/assets/{asset.pk}/state-store": None,
        "/api/statestore/v1/gc/dry-run": None,
        f"/runs/{run.pk}/export/?format=json": None,
        f"/assets/{asset.pk}/keys/export/?format=json": None,
    }
    for i, text in enumerate(TEXTS):
        answers[f"{task}/k{i}"] = text
        answers[f"/api/v2/assets/{asset.pk}/state-store/k{i}"] = text
    for path, text in answers.items():
        response = client.get(path)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code == 200, (path, body[:300])
        decoded = strict(body)
        if text is not None:
            assert decoded["value"] == text, path
    exported = strict(b"".join(client.get(f"/runs/{run.pk}/export/?format=json").streaming_content))
    assert {entry["value_json"] for entry in exported["keys"]} == set(TEXTS)
