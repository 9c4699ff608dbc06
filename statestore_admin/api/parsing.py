"""Reading a request as Airflow's FastAPI does: its query and path parameters, its JSON body, and FastAPI's
422 items (``errors.RequestInvalid``) for whatever does not parse, word for word as pydantic reports them."""

import re
from uuid import UUID

from django.utils.dateparse import parse_datetime
from rest_framework.parsers import JSONParser

from statestore_admin.api.errors import RequestInvalid, error
from statestore_admin.core import values
from statestore_admin.core.errors import Invalid
from statestore_admin.core.values import AT, DEFAULT, MAX_DEPTH, NEVER, Expiry, json_depth, parse_datetime_aware

TRUE = {"1", "true", "t", "yes", "y", "on"}
FALSE = {"0", "false", "f", "no", "n", "off"}

BODY_DEPTH = MAX_DEPTH + 3  # a value in a body ({"keys": [{"value": …}]}); the domain checks the value itself


class LenientJSONParser(JSONParser):
    """Accepts NaN and Infinity tokens so that the domain can refuse them with a message (Airflow: a 500).
    A body nested deeper than any allowed value is refused before parsing (the parser recurses), and so
    is an object that names a key twice (``values.loads``: JSON parsers keep the last one silently)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:  # invalid UTF-8 is refused, never stored with replacement characters
            text = stream.read().decode((parser_context or {}).get("encoding") or "utf-8")
            if not text.strip():
                return None
            if json_depth(text, BODY_DEPTH) > BODY_DEPTH:
                raise RequestInvalid(
                    error(
                        "value_error",
                        ["body"],
                        f"Value error, arrays and objects nest more than {MAX_DEPTH} levels deep in a value; "
                        f"at most {MAX_DEPTH} are allowed",
                        None,
                        ctx={"error": {}},
                    )
                )
            return values.loads(text)
        except ValueError as exc:  # UnicodeDecodeError and values.DuplicateKey are ValueErrors
            raise RequestInvalid(
                error(
                    "json_invalid",
                    ["body", getattr(exc, "pos", 0)],
                    "JSON decode error",
                    {},
                    ctx={"error": getattr(exc, "msg", str(exc))},
                )
            ) from None


MAX_INT = 2**31 - 1  # an integer column (map_index)
MAX_BIGINT = 2**63 - 1  # the largest OFFSET the database takes
MIN_BIGINT = -(2**63)


def query_int(request, name: str, default: int, minimum: int, maximum: int = MAX_INT) -> int:
    """An integer query parameter within [minimum, maximum] (a value the database can compare), else 422."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        number = int(raw)
    except ValueError:
        raise RequestInvalid(
            error(
                "int_parsing",
                ["query", name],
                "Input should be a valid integer, unable to parse string as an integer",
                raw,
            )
        ) from None
    if number < minimum:
        raise RequestInvalid(
            error(
                "greater_than_equal",
                ["query", name],
                f"Input should be greater than or equal to {minimum}",
                raw,
                ctx={"ge": minimum},
            )
        )
    if number > maximum:
        raise RequestInvalid(
            error(
                "less_than_equal",
                ["query", name],
                f"Input should be less than or equal to {maximum}",
                raw,
                ctx={"le": maximum},
            )
        )
    return number


def path_int(raw: str, name: str) -> int:
    """An integer path parameter as FastAPI parses it: anything else is Airflow's 422 ``int_parsing``."""
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise RequestInvalid(
            error(
                "int_parsing",
                ["path", name],
                "Input should be a valid integer, unable to parse string as an integer",
                raw,
            )
        )
    return int(raw)


def query_bool(request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() in TRUE | FALSE:
        return raw.lower() in TRUE
    raise RequestInvalid(
        error("bool_parsing", ["query", name], "Input should be a valid boolean, unable to interpret input", raw)
    )


_HEX = frozenset("0123456789abcdefABCDEF")
_UUID_GROUPS, _UUID_STARTS = (8, 4, 4, 4, 12), (0, 9, 14, 19, 24)


def query_uuid(request, name: str) -> UUID | None:
    """A UUID query parameter in the forms pydantic accepts (hyphenated, 32 digits, braced, ``urn:uuid:``);
    anything else is 422 ``uuid_parsing`` with pydantic's reason, word for word."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    value, reason = parse_uuid(raw)
    if value is None:
        raise RequestInvalid(
            error(
                "uuid_parsing", ["query", name], f"Input should be a valid UUID, {reason}", raw, ctx={"error": reason}
            )
        )
    return value


def parse_uuid(raw: str) -> tuple[UUID | None, str | None]:
    """``raw`` as a UUID, or None and why not, as pydantic-core (the Rust ``uuid`` crate) reports it."""
    size = len(raw.encode())
    if size > 45:
        return None, f"invalid length: found {size}"
    hyphenated = None
    if size == 36:
        hyphenated = raw
    elif size == 38 and raw[0] == "{" and raw[-1] == "}":
        hyphenated = raw[1:-1]
    elif size == 45 and raw.startswith("urn:uuid:"):
        hyphenated = raw[9:]
    if hyphenated is not None:
        digits = hyphenated.replace("-", "")
        if all(hyphenated[i] == "-" for i in (8, 13, 18, 23)) and len(digits) == 32 and set(digits) <= _HEX:
            return UUID(digits), None
        return None, _uuid_reason(hyphenated, hyphenated, 0, False)
    if size == 32 and set(raw) <= _HEX:
        return UUID(raw), None
    if len(raw) >= 2 and raw[0] == "{" and raw[-1] == "}":
        return None, _uuid_reason(raw, raw[1:-1], 1, False)
    if raw.startswith("urn:uuid:"):
        return None, _uuid_reason(raw, raw[9:], 9, False)
    return None, _uuid_reason(raw, raw, 0, True)


def _uuid_reason(whole: str, text: str, offset: int, simple: bool) -> str:
    hyphens, bounds, index = 0, [0, 0, 0, 0], 0
    for char in text:
        if char == "-":
            if hyphens < 4:
                bounds[hyphens] = index
            hyphens += 1
        elif char not in _HEX:
            return f"invalid character: found `{char}` at {index + offset}"
        index += len(char.encode())  # the crate counts bytes
    if hyphens == 0 and simple:
        return f"invalid length: found {len(whole.encode())}"
    if hyphens != 4:
        return f"invalid group count: expected 5, found {hyphens + 1}"
    for group in range(4):
        if bounds[group] != _UUID_STARTS[group + 1] - 1:
            found = bounds[group] - _UUID_STARTS[group]
            return f"invalid group length in group {group}: expected {_UUID_GROUPS[group]}, found {found}"
    return f"invalid group length in group 4: expected 12, found {len(whole.encode()) - _UUID_STARTS[4]}"


def errors_of(*parsers) -> list[dict]:
    """The validation errors of ``parsers``, in order (none when all parse)."""
    try:
        all_parsed(*parsers)
    except RequestInvalid as exc:
        return exc.errors
    return []


def all_parsed(*parsers) -> list:
    """Each parser's value; the errors of all of them in one 422, as FastAPI reports one dependency's
    parameters."""
    values, problems = [], []
    for parse in parsers:
        try:
            values.append(parse())
        except RequestInvalid as exc:
            values.append(None)
            problems += exc.errors
    if problems:
        raise RequestInvalid(*problems)
    return values


def body_fields(request, allowed: set[str], required: set[str]) -> dict:
    """A strict JSON object body: unknown fields and missing required ones are 422, as in Airflow."""
    data = request.data
    if data is None or (not data and not int(request.META.get("CONTENT_LENGTH") or 0)):  # no body at all
        raise RequestInvalid(error("missing", ["body"], "Field required", None))
    return object_fields(data, allowed, required)


def object_fields(data, allowed: set[str], required: set[str]) -> dict:
    """``data`` as a strict JSON object: not an object, unknown fields and missing required ones are 422."""
    if not isinstance(data, dict):
        raise RequestInvalid(
            error(
                "model_attributes_type",
                ["body"],
                "Input should be a valid dictionary or object to extract fields from",
                data,
            )
        )
    problems = [error("missing", ["body", name], "Field required", data) for name in sorted(required - data.keys())]
    problems += [
        error("extra_forbidden", ["body", name], "Extra inputs are not permitted", data[name])
        for name in data
        if name not in allowed
    ]
    if problems:
        raise RequestInvalid(*problems)
    return data


def parse_expires_at(data: dict) -> Expiry:
    """``"default"``, null (never) or a timezone-aware datetime; errors as pydantic reports the union (each
    member's error: the datetime's, then the literal's)."""
    raw = data.get("expires_at", DEFAULT)
    if raw == DEFAULT:
        return Expiry(DEFAULT)
    if raw is None:
        return Expiry(NEVER)
    datetime_at, literal_at = ["body", "expires_at", "datetime"], ["body", "expires_at", "literal['default']"]
    not_default = error("literal_error", literal_at, "Input should be 'default'", raw, ctx={"expected": "'default'"})
    if not isinstance(raw, str):
        raise RequestInvalid(error("datetime_type", datetime_at, "Input should be a valid datetime", raw), not_default)
    try:
        return Expiry(AT, parse_datetime_aware(raw))
    except Exception:
        if _naive(raw):
            problem = error("timezone_aware", datetime_at, "Input should have timezone info", raw)
        else:
            problem = error("datetime_from_date_parsing", datetime_at, "Input should be a valid datetime or date", raw)
        raise RequestInvalid(problem, not_default) from None


def _naive(text: str) -> bool:
    try:
        parsed = parse_datetime(text)
    except ValueError:
        return False
    return parsed is not None and parsed.tzinfo is None


def query_errors(exc: Invalid, params, names: dict[str, str] | None = None) -> RequestInvalid:
    """The domain's ``Invalid`` about query parameters as FastAPI reports them: an ``enum`` error lists the
    choices, anything else is a ``value_error``; ``loc`` names the parameter (``names``: field -> parameter)."""
    items = []
    for field, errors in exc.error_dict.items():
        name = (names or {}).get(field, field)
        value = params.get(name)
        for e in errors:
            if e.code == "enum":
                choices = ", ".join(e.params["choices"])
                items.append(error("enum", ["query", name], f"Input should be one of {choices}", value))
            else:
                items.append(error("value_error", ["query", name], f"Value error, {' '.join(e.messages)}", value))
    return RequestInvalid(*items)


def parsed_query(params, parse, names: dict[str, str] | None = None):
    """``parse(params)``, the domain reading query parameters; its ``Invalid`` as FastAPI's 422."""
    try:
        return parse(params)
    except Invalid as exc:
        raise query_errors(exc, params, names) from None
