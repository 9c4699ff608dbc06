from django.core.management.base import CommandError

from statestore_admin.access import scopes
from statestore_admin.access.actors import Actor
from statestore_admin.core.errors import Invalid, NotFound


def add_holder_arguments(parser) -> None:
    parser.add_argument("holder", metavar="GROUP_OR_USER", help="A group name (e.g. a team) or a user name.")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--group", dest="kind", action="store_const", const="group", help="HOLDER is a group.")
    kind.add_argument("--user", dest="kind", action="store_const", const="user", help="HOLDER is a user.")
    parser.add_argument("--dags", nargs="+", default=[], metavar="PATTERN", help="DAG id globs, e.g. 'etl_*'.")
    parser.add_argument(
        "--assets", nargs="+", default=[], metavar="PATTERN", help="Asset name or URI globs, e.g. 's3://etl/*'."
    )


def holder_of(options):
    try:
        return scopes.find_holder(options["holder"], options["kind"])
    except (NotFound, scopes.Invalid) as exc:
        raise CommandError(" ".join(getattr(exc, "messages", [str(exc)]))) from None


def describe(holder) -> str:
    kind = "group" if holder.__class__.__name__ == "Group" else "user"
    return f"{kind} {holder}: {scopes.patterns_of(holder).describe()}"


def change_scope(command, change, done: str, options, **arguments) -> None:
    """Run ``change`` (``grants.grant`` or ``grants.revoke``) for the holder the command line names, as the
    command's actor, and say what it did (``done``: "Added" or "Removed") and the holder's scope now."""
    holder = holder_of(options)
    try:
        count = change(holder, dags=options["dags"], assets=options["assets"], actor=Actor.command(), **arguments)
    except Invalid as exc:
        raise CommandError(" ".join(exc.messages)) from None
    command.stdout.write(f"{done} {count} pattern(s). Scope of {describe(holder)}.")
