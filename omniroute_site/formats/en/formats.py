"""The console's one date format (issue #15): ISO-like, with seconds, everywhere the
admin renders a date (lists, detail pages, filters); pages that show a moment also
convert it to the browser's local time (``gateway/static/omniroute/admin.js``)."""

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
