"""Airflow's side, the bottom layer: unmanaged models of Airflow's tables (``models``) and the router that
keeps them on the ``airflow`` database alias (``router``), Airflow's configuration read as Airflow reads it
(``config``), the database URL (``dburl``), availability and deadlines of Airflow's database
(``availability``), links into Airflow's UI (``ui_links``), the schema fixtures and their checks. It imports
nothing of ours (``make lint`` checks it): everything above may rely on it, it relies on nothing above."""
