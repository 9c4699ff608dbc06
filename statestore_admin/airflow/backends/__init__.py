"""Database backends for the Airflow alias."""
