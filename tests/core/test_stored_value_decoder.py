"""The one decoder of a row's stored text: one depth rule (``MAX_DEPTH``) for every face that shows a value."""

import json

import pytest

from statestore_admin.core import values
from statestore_admin.core.values import MAX_DEPTH
from statestore_admin.exports import documents as exports


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_decodes_json_up_to_the_nesting_limit():
    assert values.stored_value('{"a": [1, 2.5, "é"]}') == {"a": [1, 2.5, "é"]}
    assert values.stored_value(nested(MAX_DEPTH)) == json.loads(nested(MAX_DEPTH))


@pytest.mark.parametrize("text", ["not json", "", nested(MAX_DEPTH + 1), nested(5000), None])
def test_refuses_text_that_is_not_json_or_nests_deeper(text):
    with pytest.raises(ValueError):
        values.stored_value(text)
    assert values.decoded(text) == text


def test_every_face_applies_the_same_depth_rule():
    too_deep = nested(MAX_DEPTH + 1)  # the parser could read it; the rule refuses it everywhere
    assert values.pretty(too_deep) == too_deep
    assert exports._value_fields(too_deep) == {"value": None, "value_json": too_deep}
    assert exports._value_fields(nested(MAX_DEPTH)) == {"value": json.loads(nested(MAX_DEPTH))}


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", '{"a": [1, NaN]}', '{"a": 1e999}'])
def test_numbers_json_cannot_carry_are_not_decoded(text):
    """Airflow's json.dumps writes NaN and Infinity, and 1e400 is too large for a float: decoded, they would
    become numbers that strict JSON (the API's answers, the export files) cannot hold, so the value is its
    text, as for any text that is not JSON. A huge integer is exact in JSON and stays a number."""
    with pytest.raises(ValueError):
        values.stored_value(text)
    assert values.decoded(text) == text
    assert exports._value_fields(text) == {"value": None, "value_json": text}
    huge = "-" + "1" * 400
    assert values.stored_value(huge) == int(huge)
