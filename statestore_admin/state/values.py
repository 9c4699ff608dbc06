"""Validation of what users write: keys, JSON values and expiries, with Airflow's limits (SPEC §1, §4, §6)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from statestore_admin.airflow.config import AirflowConfig

MAX_KEY_LENGTH = 512


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def clean_key(key: str, field: str = "key") -> str:
    if not isinstance(key, str) or key == "":
        raise ValidationError({field: "A key is required."})
    if len(key) > MAX_KEY_LENGTH:
        raise ValidationError({field: f"A key has at most {MAX_KEY_LENGTH} characters; this one has {len(key)}."})
    if "\x00" in key:
        raise ValidationError({field: "A key cannot contain the NUL character."})
    return key


def encode_value(value, max_bytes: int | None = None, field: str = "value") -> str:
    """The text Airflow stores for ``value`` (``json.dumps``), after Airflow's checks and ours."""
    if value is None:
        raise ValidationError({field: "null is not a storable value."})
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValidationError({field: "NaN and Infinity are not valid JSON values."}) from None
    except TypeError as exc:
        raise ValidationError({field: f"Not a JSON value: {exc}"}) from None
    limit = AirflowConfig().max_value_storage_bytes if max_bytes is None else max_bytes
    size = len(text.encode())
    if limit and size > limit:
        raise ValidationError(
            {field: f"The value is {size} bytes as JSON; [state_store] max_value_storage_bytes allows {limit}."}
        )
    return text


def parse_value_text(text: str, max_bytes: int | None = None, field: str = "value") -> str:
    """Parse JSON typed by a user and return the text to store."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        message = str(exc)
        if "not valid JSON" in message:
            raise ValidationError({field: "NaN and Infinity are not valid JSON values."}) from None
        raise ValidationError({field: f"Not valid JSON: {message}"}) from None
    if isinstance(value, float) and not math.isfinite(value):  # 1e999
        raise ValidationError({field: "NaN and Infinity are not valid JSON values."})
    return encode_value(value, max_bytes, field)


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
        days = (config or AirflowConfig()).default_retention_days
        return now + timedelta(days=days) if days else None


def parse_datetime_aware(text: str, field: str = "expires_at") -> datetime:
    parsed = parse_datetime(text.strip()) if isinstance(text, str) else None
    if parsed is None:
        raise ValidationError({field: "Not a date and time; use ISO 8601, e.g. 2026-12-01T00:00:00+00:00."})
    if timezone.is_naive(parsed):
        raise ValidationError({field: "Give a time zone (e.g. +00:00 or Z): a naive date and time is ambiguous."})
    return parsed.astimezone(UTC)


def expiry_from_form(mode: str, at_text: str = "", field: str = "expires_at") -> Expiry:
    if mode == DEFAULT:
        return Expiry(DEFAULT)
    if mode == NEVER:
        return Expiry(NEVER)
    if mode == AT:
        return Expiry(AT, parse_datetime_aware(at_text or "", field))
    raise ValidationError({"expiry": f"Unknown expiry choice {mode!r}."})
