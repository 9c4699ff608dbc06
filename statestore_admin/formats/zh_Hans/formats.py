# "2026年11月30日 16:43"; thousands grouped by three with a comma, as Airflow's UI writes them in Chinese
DATETIME_FORMAT = "Y年n月j日 H:i"
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
# A chart's axis: a day, and a day with its time
MONTH_DAY_FORMAT = "n月j日"
SHORT_DATETIME_FORMAT = "n月j日 H:i"
