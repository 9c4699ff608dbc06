"""The domain of a key's story and of two runs compared, below the pages: which lines a story draws from its
values, values too long to read whole, cursors that are user input, and the formatting of the values drawn."""

import json

import pytest

from statestore_admin.access.scopes import Scope
from statestore_admin.core import formatting
from statestore_admin.state import selectors
from tests.conftest import BOTH_DATABASES
from tests.factories import make_dag_run, make_task_key


def test_lines_are_the_numbers_and_times_found_in_at_least_two_values():
    values = [
        json.dumps({"rows": 10, "at": "2026-11-30T10:00:00+00:00", "nested": {"lag": 1.5}, "flag": True}),
        None,  # too long to read whole: no point
        json.dumps({"rows": 12, "at": "2026-12-01T10:00:00Z", "nested": {"lag": 2}, "name": "x"}),
        json.dumps({"rows": 15, "once": 3}),
    ]
    series = {s.name: s for s in selectors.numeric_series(values)}
    assert list(series) == ["rows", "at", "nested.lag"]  # most often first; "once" and booleans are no line
    assert series["rows"].points == [10.0, None, 12.0, 15.0] and series["rows"].kind == "number"
    assert series["at"].kind == "time" and series["at"].points[2] - series["at"].points[0] == 86400
    assert selectors.numeric_series([json.dumps(3), json.dumps(4)])[0].name == "value"
    assert selectors.numeric_series(['"batch-1"', '"batch-2"', "not json", json.dumps(float("nan"))]) == []


def test_numbers_drawn_are_formatted_in_one_place():
    assert formatting.number(1234567) == "1,234,567"
    assert formatting.number(1234.5) == "1,234.5"
    assert formatting.number(0.125) == "0.125"
    assert formatting.number(-3.0) == "-3"


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_a_long_value_is_previewed_not_read_whole_and_bad_cursors_are_the_first_page():
    runs = [make_dag_run(dag_id="etl_long") for _ in range(3)]
    long_value = {"blob": "x" * (selectors.FULL_VALUE_CHARS + 10)}
    keys = [make_task_key(run, key="k", value=long_value if n == 1 else {"n": n}) for n, run in enumerate(runs)]
    story = selectors.key_story(keys[0], scope=Scope())
    assert [e.row.pk for e in story.entries] == [keys[2].pk, keys[1].pk, keys[0].pk]
    assert story.entries[1].value is None and len(story.entries[1].row.preview) == selectors.PREVIEW_CHARS
    assert story.entries[0].has_previous and story.entries[0].previous is None  # the long one: no diff
    for cursor in ("%%%", "WyJ4Il0", "W3RydWVd", "W251bGxd"):  # junk, ["x"], [true], [null]
        assert [e.row.pk for e in selectors.key_story(keys[0], cursor, scope=Scope()).entries] == [
            e.row.pk for e in story.entries
        ]
    first = selectors.compare_runs(runs[0], runs[2])
    for cursor in ("%%%", "WyJ4IiwgMl0", "WyJ4IiwgMCwgdHJ1ZSwgImsiXQ"):  # junk, ["x", 2], ["x", 0, true, "k"]
        again = selectors.compare_runs(runs[0], runs[2], cursor)
        assert again.cursor is None and [k.key for k in again.changed] == [k.key for k in first.changed]
