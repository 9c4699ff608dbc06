"""gunicorn's configuration for `make serve` (README, "Production"). Every value can be set from the environment.

Worker processes with an event loop each (statestore_admin/serving.py): the loop reads requests and their
whole bodies, so a slow or stalled client holds a connection, never a thread; a request that has fully
arrived runs Django in one of the worker's GUNICORN_THREADS threads. Each of those threads keeps its own
connections to both databases for up to ``DATABASE_CONN_MAX_AGE`` / ``AIRFLOW_DATABASE_CONN_MAX_AGE``
seconds, so a server holds at most WEB_CONCURRENCY x GUNICORN_THREADS connections to Airflow's database
(12 by default on 2 cores). A client gets GUNICORN_CLIENT_TIMEOUT seconds (30) for a new connection's first
request headers, and as long again for a body (then 408); a body larger than the largest upload is 413.
"""

import os

wsgi_app = "statestore_admin.wsgi:application"

# Where to listen. Behind a reverse proxy keep it on 127.0.0.1 or a private address only the proxy reaches.
bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"

# Processes x threads for Django: CPU cores + 1 workers (3 on 2 cores), 4 threads each.
workers = int(os.environ.get("WEB_CONCURRENCY", (os.cpu_count() or 1) + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 4))
# gunicorn's asyncio worker reads requests and their bodies; Django runs in `threads` threads once a request
# has fully arrived (statestore_admin/serving.py): a slow or stalled client holds a connection, never a thread.
worker_class = "statestore_admin.serving.Worker"

# The longest URL of a valid key: its API item URL, with a 512-character key and 250-character dag, run and
# task ids, every character 4 bytes of UTF-8 percent-encoded (12 bytes), plus the fixed path and a query.
# gunicorn's default (4,094 bytes) would answer 414 for keys Airflow accepts.
limit_request_line = 512 * 12 + 3 * 250 * 12 + 1024

# A worker that stops reporting for `timeout` seconds is killed and restarted. Requests to Airflow's database
# have deadlines of their own (docs/operations.md); this is the last resort above the longest of them.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 120))
# On SIGTERM (deploys, `docker stop`), requests in flight get this long to finish.
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", 30))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", 5))

# Logs to stdout and stderr, for the process supervisor to collect. The access log has the client's address
# as the proxy reported it (X-Forwarded-For) and the request's duration in microseconds.
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
access_log_format = '%(h)s "%({x-forwarded-for}i)s" %(t)s "%(r)s" %(s)s %(b)s %(D)sus "%(a)s"'

# The addresses (or networks, CIDR) of the TLS-terminating proxies whose X-Forwarded-Proto gunicorn believes
# (comma-separated, or * for any). Default: the local host only, as gunicorn's own default.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

# No control socket ($HOME/.gunicorn/gunicorn.ctl): several servers on one host would share it.
control_socket_disable = True
