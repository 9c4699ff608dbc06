from django.conf import settings
from django.shortcuts import render

from statestore_admin.state.selectors import store_totals


def home(request):
    return render(
        request,
        "home/index.html",
        {"totals": store_totals(), "airflow_database": settings.AIRFLOW_DATABASE},
    )
