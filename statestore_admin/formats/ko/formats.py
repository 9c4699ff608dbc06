# "2026년 11월 30일 16:43" (Django's Korean format is 12-hour)
DATETIME_FORMAT = "Y년 n월 j일 H:i"
# A chart's axis: a day, and a day with its time
MONTH_DAY_FORMAT = "n월 j일"
SHORT_DATETIME_FORMAT = "n월 j일 H:i"
