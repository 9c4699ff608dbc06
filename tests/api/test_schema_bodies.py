"""Every response our endpoints declare in the OpenAPI document describes its body: no free-form object
(``type: object`` with no properties), so a new endpoint without a response schema fails here, and the
fuzz run has something to check its answers against."""

from drf_spectacular.generators import SchemaGenerator

OURS = "/api/statestore/v1/"


def resolved(document, schema):
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def free_form(document, schema) -> bool:
    schema = resolved(document, schema)
    if any(k in schema for k in ("anyOf", "oneOf", "allOf")):
        return False
    return schema.get("type", "object") == "object" and not schema.get("properties")


def free_form_responses(document):
    for path, item in document["paths"].items():
        if not path.startswith(OURS):
            continue
        for method, operation in item.items():
            for status, response in operation.get("responses", {}).items():
                if status == "204":
                    continue
                content = response.get("content")
                if not content:
                    yield path, method, status
                    continue
                for media_type, body in content.items():
                    if "json" in media_type and free_form(document, body.get("schema", {})):
                        yield path, method, status


def test_no_free_form_response_bodies_for_our_endpoints():
    document = SchemaGenerator().get_schema(request=None, public=True)
    assert any(path.startswith(OURS) for path in document["paths"])
    assert sorted(free_form_responses(document)) == []


def test_a_free_form_body_is_found():
    loose = {"$ref": "#/components/schemas/Loose"}
    document = {
        "components": {"schemas": {"Loose": {"type": "object"}}},
        "paths": {f"{OURS}new": {"get": {"responses": {"200": {"content": {"application/json": {"schema": loose}}}}}}},
    }
    assert set(free_form_responses(document)) == {(f"{OURS}new", "get", "200")}
