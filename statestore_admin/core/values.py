"""Validation of what users write (keys, JSON values and expiries, with Airflow's limits: docs/airflow.md),
and the one rule for showing keys and values to people (``visible_segments``)."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from statestore_admin.airflow.config import AirflowConfig, airflow_config
from statestore_admin.core.errors import Invalid

MAX_KEY_LENGTH = 512
MAX_DEPTH = 64  # nesting of arrays and objects in a value: deeper values are refused at write time


def _invalid(field: str, message: str, code: str) -> Invalid:
    """A field error with a code, so that each face can word it its own way (the API as Airflow does)."""
    return Invalid({field: Invalid(message, code=code)})


def clean_key(key: str, field: str = "key") -> str:
    if not isinstance(key, str) or key == "":
        raise _invalid(field, _("A key is required."), "key_required")
    if len(key) > MAX_KEY_LENGTH:
        message = _("A key has at most %(limit)s characters; this one has %(length)s.")
        raise _invalid(field, message % {"limit": MAX_KEY_LENGTH, "length": len(key)}, "key_too_long")
    if "\x00" in key:
        raise _invalid(field, _("A key cannot contain the NUL character."), "key_nul")
    refuse_surrogate(key, field)
    return key


def refuse_surrogate(text: str, field: str, name: str | None = None) -> None:
    """``Invalid`` (code ``surrogate``) when a key, or the field ``name`` (a DAG, run or task id), holds a lone
    surrogate."""
    found = _SURROGATE.search(text)
    if found:
        where = {"code": surrogate_name(found.group()), "position": found.start() + 1, "name": name}
        if name is None:
            message = _("The key contains a lone surrogate (%(code)s) at character %(position)s.")
        else:
            message = _('"%(name)s" contains a lone surrogate (%(code)s) at character %(position)s.')
        raise _invalid(field, message % where, "surrogate")


# Lone surrogates ------------------------------------------------------------------------------------
# JSON's \u escapes can spell half of a UTF-16 surrogate pair ("\ud800"), which Python decodes to a str
# that no UTF-8 encoder accepts: PostgreSQL cannot store it in a key, and every page or answer that
# encodes it fails. A pair ("\ud83d\ude00") is decoded to one character, so any surrogate left is lone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_name(char: str) -> str:
    return f"U+{ord(char):04X}"


def _member(path: str, name: str) -> str:
    return f"{path}.{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"{path}[{json.dumps(name)}]"


def stored_surrogate(text: str) -> str | None:
    """Where the stored text of a value (``json.dumps``'s, which spells a lone surrogate ``"\\ud800"``, as
    Airflow writes it) holds a lone surrogate, in ``lone_surrogate``'s words, or None. Text that is not JSON
    (or nests too deeply to parse) is searched as it is."""
    if "\\u" not in text and not _SURROGATE.search(text):
        return None
    if json_depth(text) <= MAX_DEPTH:
        try:
            return lone_surrogate(json.loads(text))
        except ValueError:
            pass
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return _("a lone surrogate (%(code)s) at character %(position)s") % {
        "code": surrogate_name(found.group()),
        "position": found.start() + 1,
    }


def lone_surrogate(value) -> str | None:
    """Where the first lone surrogate of a JSON value is, in document order, as words for a message
    ("a lone surrogate (U+D800) at $.a[2]"), or None. Object keys count too ("… in the key $.a"). No
    recursion: values may nest deeply."""
    pending = [(value, "$", False)]
    while pending:
        item, path, is_name = pending.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                where = {"code": surrogate_name(found.group()), "path": path}
                if is_name:
                    return _("a lone surrogate (%(code)s) in the key %(path)s") % where
                return _("a lone surrogate (%(code)s) at %(path)s") % where
        elif isinstance(item, dict):
            for name, child in reversed(list(item.items())):
                member = _member(path, str(name))
                pending.append((child, member, False))
                pending.append((name, member, True))  # the member's name is checked before its value
        elif isinstance(item, (list, tuple)):
            pending.extend((child, f"{path}[{index}]", False) for index, child in reversed(list(enumerate(item))))
    return None


# Nesting depth, without recursion: strings are skipped whole, brackets counted.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"|[\[\]{}]')


def json_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """How deeply arrays and objects nest in JSON ``text`` (``1`` → 0, ``[[1]]`` → 2), counting stops
    above ``limit`` (the answer is then ``limit + 1``). Text that is not JSON gets a meaningless number."""
    depth = deepest = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def value_depth(value, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and dicts nest in ``value``, without recursion; stops above ``limit``."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, (list, tuple)):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        pending.extend((child, depth + 1) for child in item)
    return deepest


def too_deep(field: str = "value") -> Invalid:
    message = _("Arrays and objects nest more than %(limit)s levels deep; at most %(limit)s are allowed.")
    return _invalid(field, message % {"limit": MAX_DEPTH}, "too_deep")


def encode_value(value, max_bytes: int | None = None, field: str = "value") -> str:
    """The text Airflow stores for ``value`` (``json.dumps``), after Airflow's checks and ours (nesting at
    most ``MAX_DEPTH`` levels)."""
    if value is None:
        raise _invalid(field, _("null is not a storable value."), "null")
    if value_depth(value) > MAX_DEPTH:
        raise too_deep(field)
    where = lone_surrogate(value)
    if where:
        message = _("The value contains %(where)s: it cannot be encoded as UTF-8.") % {"where": where}
        raise _invalid(field, message, "surrogate")
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        raise _invalid(field, _("NaN and Infinity are not valid JSON values."), "non_finite") from None
    except TypeError as exc:
        raise _invalid(field, _("Not a JSON value: %(error)s") % {"error": exc}, "not_json") from None
    limit = airflow_config().max_value_storage_bytes if max_bytes is None else max_bytes
    size = len(text.encode())
    if limit and size > limit:
        error = _invalid(
            field,
            _("The value is %(size)s bytes as JSON; [state_store] max_value_storage_bytes allows %(limit)s.")
            % {"size": size, "limit": limit},
            "too_large",
        )
        error.limit = limit
        raise error
    return text


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (``json`` would silently keep the last one)."""

    def __init__(self, key: str):
        message = _("The object names the key %(key)s twice; only one value per key can be stored: remove the other.")
        super().__init__(message % {"key": json.dumps(key, ensure_ascii=False)})


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict:
    found = {}
    for key, item in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = item
    return found


def loads(text: str):
    """The one parser of JSON that users type or send (the pages, Django admin, the API's bodies): NaN and
    Infinity are parsed (so that the services refuse them by name) and an object that names a key twice
    is refused (``DuplicateKey``). Call it on text whose nesting was checked (``json_depth``)."""
    return json.loads(text, parse_constant=float, object_pairs_hook=_unique_pairs)


def decode_json_text(text: str, field: str = "value"):
    """JSON typed by a user, as a value for the services (which refuse null, NaN and Infinity). Nesting
    deeper than ``MAX_DEPTH`` is refused before parsing (the parser recurses)."""
    if json_depth(text) > MAX_DEPTH:
        raise too_deep(field)
    try:
        return loads(text)
    except DuplicateKey as exc:
        raise _invalid(field, str(exc), "duplicate_key") from None
    except ValueError as exc:
        raise _invalid(field, _("Not valid JSON: %(error)s") % {"error": exc}, "json_invalid") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400: past a float's range
        raise ValueError(f"{text} is too large for a float")
    return number


def stored_value(text: str):
    """The one decoder of a row's stored text (``json.dumps`` written by Airflow or by us) into its value.
    Raises ``ValueError`` when the text is not JSON or nests arrays and objects deeper than ``MAX_DEPTH``
    (written outside the dashboard, where nothing limits it): the depth is checked before parsing, as the
    parser recurses. Each face decides what to show instead (``decoded``: the text itself).

    Strict JSON only: NaN and Infinity (which Python's ``json.dumps`` writes) and a number too large for a float
    (1e400, which would decode to infinity) are refused, since no answer in strict JSON (the API's, the export
    files) could carry the decoded value: they are shown and sent as their text. An integer of any size stays."""
    if not isinstance(text, str) or json_depth(text) > MAX_DEPTH:
        raise ValueError("not a stored JSON value within the nesting limit")
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def decoded(text: str):
    """The stored value, or its text as it is when ``stored_value`` cannot decode it."""
    try:
        return stored_value(text)
    except ValueError:
        return text


def same_value(stored: str, text: str) -> bool:
    """Whether writing ``text`` (``encode_value``'s) over the ``stored`` text changes nothing: the same
    text, or the same JSON value spelled otherwise by another writer (spacing, escapes). ``1`` and
    ``1.0``, or objects with their keys in another order, are different values."""
    if stored == text:
        return True
    if json_depth(stored) > MAX_DEPTH:
        return False
    try:
        return json.dumps(loads(stored), allow_nan=False) == text
    except ValueError:  # not JSON, NaN, a key named twice: writing changes it
        return False


def pretty(text: str) -> str:
    """A stored value indented for reading and editing, its non-ASCII characters as they are and its hidden
    characters (``HIDDEN``) as JSON escapes, so that an editor shows them and saving them back writes the
    same value. Text that is not JSON, or nested deeper than ``MAX_DEPTH`` (written by Airflow, which has
    no limit), stays as it is."""
    try:
        indented = json.dumps(stored_value(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
    # Outside strings there is only JSON's own whitespace: every hidden character but a new line is in one.
    return HIDDEN.sub(lambda m: m.group() if m.group() == "\n" else json.dumps(m.group())[1:-1], indented)


# Showing keys and values to people ------------------------------------------------------------------
# Control characters (Cc), line and paragraph separators (Zl, Zp), the invisible format characters (Cf:
# bidi overrides and isolates, zero-width spaces, BOM, …) and lone surrogates (which JSON's \u escapes can
# make), as of Python's Unicode data (tests/state/test_writes_values.py derives it again). Zero-width
# (non-)joiners and tag characters are left out: scripts and emoji sequences need them.
HIDDEN = re.compile(
    r"[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b\u200e-\u200f"
    r"\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\ud800-\udfff]"
)
# A \u escape (a surrogate pair as one), or any other escape (kept as it is: \n, \", \\).
_ESCAPE = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\.")


def unescaped(json_text: str) -> str:
    """JSON text (all of a value, or its first characters) with its ``\\u`` escapes as the characters they
    stand for, as people read them (``"Gr\\u00fc\\u00dfe"`` → ``"Grüße"``); escapes of a quote or a
    backslash stay, so the text remains the same JSON. The characters that ``HIDDEN`` matches are shown
    by ``visible_segments`` afterwards."""

    def one(match: re.Match) -> str:
        high, low, single = match.groups()
        if high:
            return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00)
        if single and single.lower() not in ("0022", "005c"):
            return chr(int(single, 16))
        return match.group()

    return _ESCAPE.sub(one, json_text) if "\\" in json_text else json_text


def hidden_symbol(char: str) -> str:
    """How a hidden character is shown: a control picture (␀, ␉, ␛, ␡) for ASCII controls, its JSON
    escape (``\\u202e``) for the others."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return json.dumps(char)[1:-1]


def hidden_name(char: str) -> str:
    code = f"U+{ord(char):04X}"
    if _SURROGATE.match(char):
        return _("%(code)s lone surrogate") % {"code": code}
    name = unicodedata.name(char, None)  # Unicode's own names stay as Unicode spells them
    return f"{code} {name}" if name else _("%(code)s control character") % {"code": code}


def visible_segments(text: str) -> list[tuple[str, str | None]]:
    """``text`` (a key, or a value as ``unescaped`` shows it) in runs: ``(text, None)`` for ordinary
    characters, ``(symbol, name)`` for each hidden character, which pages show as a badge instead of
    letting it act (a right-to-left override would reorder the text around it)."""
    segments, start = [], 0
    for match in HIDDEN.finditer(text):
        if match.start() > start:
            segments.append((text[start : match.start()], None))
        segments.append((hidden_symbol(match.group()), hidden_name(match.group())))
        start = match.end()
    if start < len(text) or not segments:
        segments.append((text[start:], None))
    return segments


# Expiry -------------------------------------------------------------------------------------------
DEFAULT = "default"
NEVER = "never"
AT = "at"


@dataclass(frozen=True)
class Expiry:
    """How a task key's ``expires_at`` is computed at write time, as Airflow's writers do."""

    mode: str  # DEFAULT, NEVER or AT
    at: datetime | None = None

    def resolve(self, now: datetime, config: AirflowConfig | None = None) -> datetime | None:
        if self.mode == NEVER:
            return None
        if self.mode == AT:
            return self.at
        days = (config or airflow_config()).default_retention_days
        if not days:
            return None
        try:
            return now + timedelta(days=days)
        except OverflowError:  # past 9999-12-31, where Python's (and Airflow's writers') datetimes end
            message = _(
                "Airflow's [state_store] default_retention_days (%(days)s days) puts the default expiry past "
                "9999-12-31: choose a date and time, or never."
            )
            raise Invalid({"expires_at": message % {"days": days}}) from None


def parse_datetime_aware(text: str, field: str = "expires_at") -> datetime:
    """An ISO 8601 date and time with a time zone, in UTC. Anything else (month 13, Feb 30, hour 25,
    an offset of +25:00, no time zone, a year that leaves the calendar in UTC) is ``Invalid``."""
    try:
        parsed = parse_datetime(text.strip()) if isinstance(text, str) else None
    except ValueError:  # well-formed but impossible: month 13, Feb 30, hour 25, offset +25:00
        parsed = None
    if parsed is None:
        raise Invalid({field: _("Not a date and time; use ISO 8601, e.g. 2026-12-01T00:00:00+00:00.")})
    if timezone.is_naive(parsed):
        raise Invalid({field: _("Give a time zone (e.g. +00:00 or Z): a naive date and time is ambiguous.")})
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise Invalid({field: _("That date and time is out of range.")}) from None


def expiry_choices() -> list[tuple[str, str]]:
    """The expiries a person may choose for a key (the pages' and Django admin's forms), in the words of
    Airflow's ``[state_store] default_retention_days``; the values are ``expiry_from_form``'s modes."""
    try:
        days = airflow_config().default_retention_days
        default = (
            _("Default (%(days)s days, [state_store] default_retention_days)") % {"days": days}
            if days
            else _("Default (never: [state_store] default_retention_days = 0)")
        )
    except ValidationError:
        default = _("Default ([state_store] default_retention_days is invalid)")
    return [(DEFAULT, default), (NEVER, _("Never expires")), (AT, _("At a date and time"))]


def expiry_from_form(mode: str, at_text: str = "", field: str = "expires_at") -> Expiry:
    if mode == DEFAULT:
        return Expiry(DEFAULT)
    if mode == NEVER:
        return Expiry(NEVER)
    if mode == AT:
        return Expiry(AT, parse_datetime_aware(at_text or "", field))
    raise Invalid({"expiry": _("Unknown expiry choice %(mode)r.") % {"mode": mode}})
