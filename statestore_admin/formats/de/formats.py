# "30. Nov 2026, 16:43"
DATETIME_FORMAT = "j. M Y, H:i"
