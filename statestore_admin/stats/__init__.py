"""Statistics of the state store: snapshots of per-DAG figures and the one-at-a-time run that takes
them (``snapshots``), reading them back (``reads``), the overview's figures and largest values
(``figures``), figures over time (``history``) and the Insights charts' data (``insights``)."""
