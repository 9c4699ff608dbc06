#!/bin/sh
# `manage.py COMMAND` anywhere in the image: Django's management commands of the dashboard (the image's PATH has
# this directory). exec: the command replaces the shell, so signals reach it.
exec /opt/statestore-admin/venv/bin/python /opt/statestore-admin/manage.py "$@"
