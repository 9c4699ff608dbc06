# "2026年11月30日 16:43"
DATETIME_FORMAT = "Y年n月j日 H:i"
# A chart's axis: a day, and a day with its time
MONTH_DAY_FORMAT = "n月j日"
SHORT_DATETIME_FORMAT = "n月j日 H:i"
