"""The demo's accounts, marked as such: a dashboard on a real Airflow database refuses to start while its
database holds any (statestore.E050, ``demo.checks``), and ``remove_demo_accounts`` deletes them.

``demo_setup`` puts every user it makes in the group ``DEMO_ACCOUNTS_GROUP``, a marker that survives a rename
and a dump and load of the database. Demos made before the marker existed left users with the demo's names and
no marker, in the database a real deployment then reused (``var/dashboard.sqlite3``): those names count too.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Q

DEMO_USERNAME = "demo"
DEMO_VIEWER_USERNAME = "demo-viewer"
DEMO_OPERATOR_USERNAME = "demo-etl"
DEMO_TEAM_GROUP = "demo-team-etl"
# A group with no permission and no scope: membership marks an account as the demo's, and grants nothing.
DEMO_ACCOUNTS_GROUP = "demo accounts"


def mark(user) -> None:
    group, _ = Group.objects.get_or_create(name=DEMO_ACCOUNTS_GROUP)
    user.groups.add(group)


def demo_accounts():
    """The users of the dashboard's database that are the demo's: marked, or named as the demo names its users."""
    names = (DEMO_USERNAME, DEMO_VIEWER_USERNAME, DEMO_OPERATOR_USERNAME)
    return get_user_model().objects.filter(Q(groups__name=DEMO_ACCOUNTS_GROUP) | Q(username__in=names)).distinct()


@transaction.atomic
def remove_demo_accounts() -> tuple[list[str], int]:
    """Delete the demo's accounts, with their API tokens (and scopes; their audit events stay, without the
    user, under their name), and the demo's groups once no one is left in them. (usernames, tokens deleted)."""
    users = list(demo_accounts().order_by("username"))
    tokens = sum(user.api_tokens.count() for user in users)
    for user in users:
        user.delete()
    Group.objects.filter(name__in=(DEMO_ACCOUNTS_GROUP, DEMO_TEAM_GROUP), user__isnull=True).delete()
    return [user.username for user in users], tokens
