"""Send the Airflow mirror models to the Airflow alias; never migrate anything there."""

from django.conf import settings

AIRFLOW_APP_LABEL = "airflow"


def airflow_alias() -> str:
    return settings.AIRFLOW_DB_ALIAS


class AirflowRouter:
    def _is_airflow(self, model) -> bool:
        return model._meta.app_label == AIRFLOW_APP_LABEL

    def db_for_read(self, model, **hints):
        return airflow_alias() if self._is_airflow(model) else None

    def db_for_write(self, model, **hints):
        return airflow_alias() if self._is_airflow(model) else None

    def allow_relation(self, obj1, obj2, **hints):
        if self._is_airflow(obj1) or self._is_airflow(obj2):
            return self._is_airflow(obj1) and self._is_airflow(obj2)
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if db == airflow_alias() or app_label == AIRFLOW_APP_LABEL:
            return False
        return None
