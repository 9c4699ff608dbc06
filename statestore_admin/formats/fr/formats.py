# "30 nov 2026, 16:43"
DATETIME_FORMAT = "j b Y, H:i"
