"""How each language writes a time and a number on the pages (Django's ``FORMAT_MODULE_PATH``): one module per
locale, overriding only what the dashboard needs over Django's own formats. ``DATETIME_FORMAT`` is the dashboard's
absolute time, 24-hour as operators read logs ("30 Nov 2026, 16:43" in English, "2026년 11월 30일 16:43" in
Korean); ``dashboard/templatetags/display.py`` adds the seconds where a page shows them. A chart's axis writes a day
as ``MONTH_DAY_FORMAT`` ("30 Nov") and a time as ``SHORT_DATETIME_FORMAT`` ("30 Nov 16:43"). Thousands are grouped by
three in every language, as Airflow's UI does (the browser's ``Intl.NumberFormat``)."""
