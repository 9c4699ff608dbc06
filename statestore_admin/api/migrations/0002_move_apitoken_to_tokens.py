"""ApiToken now belongs to the tokens app (``tokens.0001_initial``): it leaves the API app's state only.

The table ``api_apitoken`` and its rows stay; the tokens app's model uses it.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
        ("tokens", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
