# "2026년 11월 30일 16:43" (Django's Korean format is 12-hour)
DATETIME_FORMAT = "Y년 n월 j일 H:i"
