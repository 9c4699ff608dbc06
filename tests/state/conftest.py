import pytest

from statestore_admin.access.actors import Actor


@pytest.fixture
def ui(operator):
    """The operator acting through the pages."""
    return Actor(via="ui", user=operator, host="127.0.0.1")


@pytest.fixture
def system():
    return Actor.command()
