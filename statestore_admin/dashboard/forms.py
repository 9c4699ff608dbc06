"""Forms of the dashboard's actions. They only shape input; the services validate and write."""

from django import forms
from django.core.exceptions import ValidationError

from statestore_admin.airflow.config import airflow_config
from statestore_admin.state.values import AT, DEFAULT, NEVER, expiry_from_form


def apply_errors(form: forms.Form, error: ValidationError) -> None:
    """Show a service's ValidationError next to the field it names (or above the form)."""
    for field, messages in error.message_dict.items():
        form.add_error(field if field in form.fields else None, messages)


def expiry_choices() -> list[tuple[str, str]]:
    try:
        days = airflow_config().default_retention_days
        default = (
            f"Default ({days} days, [state_store] default_retention_days)"
            if days
            else "Default (never: [state_store] default_retention_days = 0)"
        )
    except ValidationError:
        default = "Default ([state_store] default_retention_days is invalid)"
    return [(DEFAULT, default), (NEVER, "Never expires"), (AT, "At a date and time")]


class ExpiryFields(forms.Form):
    expiry = forms.ChoiceField(choices=(), widget=forms.RadioSelect, initial=DEFAULT)
    expires_at = forms.CharField(
        required=False,
        label="Expires at",
        help_text="ISO 8601 with a time zone, e.g. 2026-12-01T00:00:00+00:00",
        widget=forms.TextInput(attrs={"placeholder": "2026-12-01T00:00:00+00:00", "autocomplete": "off"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expiry"].choices = expiry_choices()

    def chosen_expiry(self):
        """The Expiry to write; raises ValidationError naming the field."""
        return expiry_from_form(self.cleaned_data["expiry"], self.cleaned_data.get("expires_at", ""))


def value_field() -> forms.CharField:
    return forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "class": "code"}),
        help_text='JSON: a string needs quotes ("text"); null, NaN and Infinity are refused.',
    )


def key_field() -> forms.CharField:
    """No length limit here: the service says what the limit is (512 characters)."""
    return forms.CharField(strip=False, widget=forms.TextInput(attrs={"autocomplete": "off", "class": "code"}))


class ValueForm(forms.Form):
    value = value_field()
    seen_updated_at = forms.DateTimeField(widget=forms.HiddenInput, required=False)


class ExpiryForm(ExpiryFields):
    seen_updated_at = forms.DateTimeField(widget=forms.HiddenInput, required=False)


class AddTaskKeyForm(ExpiryFields):
    key = key_field()
    value = value_field()
    map_index = forms.IntegerField(initial=-1)

    field_order = ["key", "value", "map_index", "expiry", "expires_at"]


class AddAssetKeyForm(forms.Form):
    key = key_field()
    value = value_field()
