"""The pages' query-parameter parsing: forgiving for a page, strict for a download's map index."""

import pytest
from django.http import QueryDict

from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.http import params
from statestore_admin.exports import documents as exports


@pytest.mark.parametrize(
    ("query", "expected"),
    [("", 20), ("n=", 20), ("n=abc", 20), ("n=1.5", 20), ("n=7", 7), ("n=-3", 0), ("n=999", 100)],
)
def test_integer_falls_back_to_its_default_and_clamps(query, expected):
    assert params.integer(QueryDict(query), "n", 20, 0, 100) == expected


def test_integer_without_bounds_keeps_any_whole_number():
    assert params.integer(QueryDict("map_index=-5"), "map_index", -1) == -5


def test_choice_is_one_of_the_choices_or_the_default():
    assert params.choice(QueryDict("store=task"), "store", ("task", "asset"), "all") == "task"
    assert params.choice(QueryDict("store=dag"), "store", ("task", "asset"), "all") == "all"
    assert params.choice(QueryDict(""), "store", ("task", "asset"), "all") == "all"


@pytest.mark.parametrize(
    ("query", "expected"), [("", -1), ("map_index=", -1), ("map_index=3", 3), ("map_index=all", None)]
)
def test_map_index_reads_a_number_or_all(query, expected):
    assert params.map_index(QueryDict(query)) == expected


@pytest.mark.parametrize("raw", ["-2", "x", "1.0", str(exports.MAX_INT + 1)])
def test_map_index_refuses_anything_else(raw):
    with pytest.raises(Invalid) as caught:
        params.map_index(QueryDict(f"map_index={raw}"))
    assert caught.value.message_dict == {"map_index": ["map_index is a whole number from -1, or all."]}
