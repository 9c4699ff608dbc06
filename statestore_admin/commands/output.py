"""What the state-store commands print for scripts: with ``--json``, one JSON object per run on standard output
(the same shapes as the API's), instead of the text for people (``gc_text``, ``orphans_text``, ``stats_text``)."""

import json


def add_json_flag(parser, what: str) -> None:
    """The ``--json`` option, printing ``what`` ("the report") as one JSON object."""
    parser.add_argument("--json", action="store_true", help=f"Print {what} as one JSON object instead of text.")


def write_json(command, document: dict) -> None:
    """``document`` on ``command``'s standard output, one line."""
    command.stdout.write(json.dumps(document))
