"""Forms of the dashboard's actions. They only shape input; the services validate and write.

Two things are asked of the user here, before any service runs, because they are almost always slips:
an expiry in the past (the key expires at once: the next garbage collection deletes it) and a new key
that starts or ends with a blank (a task reading the key without the blank finds nothing). Each is
refused with a message on its field until the user ticks the box that confirms it.
"""

import zoneinfo
from datetime import datetime

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.core.values import AT, DEFAULT, NEVER, Expiry, expiry_choices, parse_datetime_aware
from statestore_admin.dashboard.templatetags.display import absolute, relative
from statestore_admin.dashboard.timezones import (
    active_zone_name,
    known_zone,
    local_to_utc,
    localtime,
    picker_text,
    shown_in_utc,
)

QUICK_DAYS = (1, 7)  # the picker's shortcuts: expire this many days from now


def apply_errors(form: forms.Form, error: ValidationError) -> None:
    """Show a service's ValidationError next to the field it names (or above the form)."""
    for field, messages in error.message_dict.items():
        form.add_error(field if field in form.fields else None, messages)


def expiry_text(at: datetime | None, now: datetime) -> str:
    """What an expiry means, for a message after it was set: "expires on 30 Dec 2026, 17:43 (in 4 weeks)"
    in the user's time zone, "never expires", or "has expired: …" for a time that has passed."""
    if at is None:
        return _("never expires")
    if at <= now:
        return _("has expired (%(at)s): the next garbage collection deletes it") % {"at": absolute(at)}
    return _("expires on %(at)s (%(relative)s)") % {"at": absolute(at), "relative": relative(at, now)}


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    return known_zone(name) if name else None


class ExpiryFields(forms.Form):
    """How long a task key lives. The date and time are picked in the user's time zone (the one the
    pages show), which travels with the form (``tz``) so that it is read as it was shown."""

    expiry = forms.ChoiceField(choices=(), widget=forms.RadioSelect, initial=DEFAULT)
    expires_at = forms.CharField(
        required=False,
        label=gettext_lazy("Expires at"),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "autocomplete": "off"}),
    )
    tz = forms.CharField(required=False, widget=forms.HiddenInput)
    confirm_past = forms.BooleanField(
        required=False, label=gettext_lazy("Yes, expire it now: the next garbage collection deletes the key.")
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expiry"].choices = expiry_choices()
        self.fields["tz"].initial = active_zone_name()
        self.fields["expires_at"].help_text = _("In your time zone, %(zone)s.") % {"zone": self.zone_name}
        self.quick_days = QUICK_DAYS
        self.instant = None  # the chosen expiry's time once valid
        self.asks_past = False  # the chosen time has passed: the form asks to confirm it

    @property
    def zone_name(self) -> str:
        """The zone the picker's date and time are in."""
        posted = self.data.get("tz", "") if self.is_bound else ""
        return posted if _zone(posted) else active_zone_name()

    def show_expiry(self, at: datetime | None) -> None:
        """Start with ``at`` (a key's current expiry) chosen, in the picker's zone."""
        self.initial["expiry"] = NEVER if at is None else AT
        if at is None:
            return
        local = localtime(at)
        if shown_in_utc(local):  # an end of the calendar the reader's zone cannot show: the picker is in UTC
            self.initial["tz"] = "UTC"
            self.fields["expires_at"].help_text = _("In UTC: your time zone has no such date.")
        self.initial["expires_at"] = picker_text(local)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("expiry") != AT:
            return cleaned
        try:
            self.instant = local_to_utc(cleaned.get("expires_at", ""), cleaned.get("tz", ""))
        except ValidationError as error:
            apply_errors(self, error)
            return cleaned
        if self.instant <= timezone.now() and not cleaned.get("confirm_past"):
            self.asks_past = True
            self.add_error(
                "expires_at",
                _("This time has passed: tick the box below to expire the key now, or pick a later time."),
            )
        return cleaned

    def chosen_expiry(self) -> Expiry:
        mode = self.cleaned_data["expiry"]
        return Expiry(mode, self.instant if mode == AT else None)


def value_field() -> forms.CharField:
    return forms.CharField(
        strip=False,
        label=gettext_lazy("Value"),
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "class": "code"}),
        help_text=gettext_lazy('JSON: a string needs quotes ("text"); null, NaN and Infinity are refused.'),
    )


def key_field() -> forms.CharField:
    """No length limit here: the service says what the limit is (512 characters)."""
    return forms.CharField(
        strip=False, label=gettext_lazy("Key"), widget=forms.TextInput(attrs={"autocomplete": "off", "class": "code"})
    )


class NewKeyFields(forms.Form):
    """A new key and its value. A key that starts or ends with a blank needs ``keep_blanks``: Airflow
    allows it, so the dashboard does too, but only on purpose."""

    key = key_field()
    value = value_field()
    keep_blanks = forms.BooleanField(
        required=False, label=gettext_lazy("Keep the blanks: the key really starts or ends with them.")
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asks_blanks = False  # the key starts or ends with a blank: the form asks to confirm it

    def clean(self):
        cleaned = super().clean()
        key = cleaned.get("key") or ""
        if key != key.strip() and not cleaned.get("keep_blanks"):
            self.asks_blanks = True
            self.add_error("key", _blanks_message(key))
        return cleaned


def _blanks_message(key: str) -> str:
    names = {"key": repr(key), "stripped": repr(key.strip())}
    if key[0].isspace() and key[-1].isspace():
        message = _(
            "The key starts and ends with a blank (%(key)s): a task reading %(stripped)s would not find it. "
            "Remove the blanks, or tick the box to keep them."
        )
    elif key[0].isspace():
        message = _(
            "The key starts with a blank (%(key)s): a task reading %(stripped)s would not find it. "
            "Remove the blanks, or tick the box to keep them."
        )
    else:
        message = _(
            "The key ends with a blank (%(key)s): a task reading %(stripped)s would not find it. "
            "Remove the blanks, or tick the box to keep them."
        )
    return message % names


class InstantField(forms.CharField):
    """An exact time a form carries back (the version of the key an edit was opened on), as ISO 8601 in UTC:
    not in the reader's zone as Django's DateTimeField writes it, which has no wall time for 9999-12-31 in
    UTC+14 and would lose the instant of a clock change's repeated hour."""

    widget = forms.HiddenInput

    def prepare_value(self, value):
        return formatting.iso(value) if isinstance(value, datetime) else value

    def to_python(self, value):
        text = super().to_python(value)
        if not text:
            return None
        try:
            return parse_datetime_aware(text, "seen_updated_at")
        except Invalid:
            raise ValidationError(_("Reload the page: the form's version of the key is not a time.")) from None


class ValueForm(forms.Form):
    value = value_field()
    seen_updated_at = InstantField(required=False)


class ExpiryForm(ExpiryFields):
    seen_updated_at = InstantField(required=False)


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` → "0–2, 5"."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


class AddTaskKeyForm(NewKeyFields, ExpiryFields):
    """``map_indexes``: those of the task's instances in the run; the key goes to one of them."""

    map_index = forms.TypedChoiceField(coerce=int, choices=(), label=gettext_lazy("Map index"))

    field_order = ["key", "keep_blanks", "value", "map_index", "expiry", "expires_at", "confirm_past"]

    def __init__(self, *args, task_id: str, map_indexes: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["map_index"]
        field.choices = [(i, _("−1 (not mapped)") if i == -1 else str(i)) for i in map_indexes]
        if map_indexes == [-1]:
            where = _("%(task_id)s is not mapped in this run: its only map index is −1.") % {"task_id": task_id}
        elif map_indexes:
            where = _("%(task_id)s has map indexes %(indexes)s in this run.") % {
                "task_id": task_id,
                "indexes": _ranges(map_indexes),
            }
        else:
            where = _("%(task_id)s has no task instance in this run: a key needs one.") % {"task_id": task_id}
        field.help_text = _("The task instance the key belongs to.")
        # Django puts the refused value in %(value)s: it stays a placeholder here.
        field.error_messages["invalid_choice"] = _("No map index %(value)s: %(where)s") % {
            "value": "%(value)s",
            "where": where,
        }
        if not map_indexes:
            field.error_messages["required"] = where


class AddAssetKeyForm(NewKeyFields):
    pass
