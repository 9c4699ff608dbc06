# "30. Nov 2026, 16:43"
DATETIME_FORMAT = "j. M Y, H:i"
# A chart's axis: a day, and a day with its time
MONTH_DAY_FORMAT = "j. M"
SHORT_DATETIME_FORMAT = "j. M H:i"
