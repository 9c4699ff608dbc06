"""Worker-side objects: the values Airflow's workers keep in object storage when the state-store
backend says so. Reading and deleting them (``store``), the backends Airflow is configured with, read for
people (``backends``), and orphans, objects no row refers to, with their report (``orphans``, the objects
it lists, ``listing``, and what it holds, ``report``)."""
