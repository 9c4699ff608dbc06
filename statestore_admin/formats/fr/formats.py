# "30 nov 2026, 16:43"
DATETIME_FORMAT = "j b Y, H:i"
# A chart's axis: a day, and a day with its time
MONTH_DAY_FORMAT = "j b"
SHORT_DATETIME_FORMAT = "j b H:i"
