"""The upgrade in place's harness (tests/compat/test_upgrade_in_place.py): Airflow 3.4.0b2's virtualenv beside
3.3.2's, a poller that keeps asking the dashboard while `airflow db migrate` runs, and a reader of Airflow's
that holds a table while the migration wants it (as a long query of Airflow's scheduler does).
"""

from __future__ import annotations

import html
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import requests

from .conftest import ROOT, SERVER, AirflowSide

NEW_VERSION = "3.4.0b2"


def airflow_34(old: AirflowSide) -> AirflowSide:
    """Airflow 3.4.0b2 on the same AIRFLOW_HOMEs as ``old`` (made by scripts/airflow_venv.sh if missing)."""
    venv = subprocess.run(
        ["bash", str(ROOT / "scripts" / "airflow_venv.sh"), NEW_VERSION], capture_output=True, text=True, check=True
    ).stdout.strip()
    new = AirflowSide(Path(venv), old.workdir)
    new.extra_cfg = old.extra_cfg
    return new


def logged_in(url: str, username: str = "compat", password: str = "compat-pw-1") -> requests.Session:
    session = requests.Session()
    page = session.get(f"{url}/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = session.post(
        f"{url}/login/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password},
        headers={"Referer": f"{url}/login/"},
    )
    assert response.ok and "Sign out" in response.text
    return session


@dataclass
class Answer:
    at: float  # seconds since the poller started
    what: str
    status: int  # 0: no answer (a timeout or a refused connection)
    text: str  # the 503's reason (the API's detail, the page's words), else ""
    seconds: float = 0.0  # how long the answer took


@dataclass
class Poller:
    """Asks each of ``targets`` (name → (session, URL)) every ``interval`` seconds until stopped, each target
    in a thread of its own (as users would: one waiting page does not hold up the others)."""

    targets: dict[str, tuple[requests.Session, str]]
    interval: float = 0.1
    answers: list[Answer] = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(what, *target), daemon=True)
            for what, target in self.targets.items()
        ]
        self._start = time.monotonic()

    def _run(self, what: str, session: requests.Session, url: str) -> None:
        while not self._stop.is_set():
            self.answers.append(self._ask(what, session, url))
            self._stop.wait(self.interval)

    def _ask(self, what: str, session: requests.Session, url: str) -> Answer:
        at = time.monotonic() - self._start
        try:
            response = session.get(url, timeout=60)
        except requests.RequestException as exc:
            return Answer(at, what, 0, type(exc).__name__, time.monotonic() - self._start - at)
        text = ""
        if response.status_code != 200:
            if response.headers.get("Content-Type", "").startswith("application/json"):
                text = str(response.json().get("detail"))
            else:
                main = re.search(r"<main.*?</main>", response.text, re.S)  # the page's own words, not its menu
                text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main[0] if main else response.text)))
        return Answer(at, what, response.status_code, text, time.monotonic() - self._start - at)

    def __enter__(self) -> Poller:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)
        self.answers.sort(key=lambda answer: answer.at)

    def statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for answer in self.answers:
            counts[answer.status] = counts.get(answer.status, 0) + 1
        return dict(sorted(counts.items()))


class TableReader:
    """A transaction of another client that has read ``table`` and stays open (ACCESS SHARE, like a long
    query of Airflow's scheduler): an ALTER TABLE of it waits until ``release``, and queries queue behind."""

    def __init__(self, db: str, table: str):
        self.connection = psycopg.connect(f"{SERVER}/{db}", application_name="long reader (upgrade test)")
        self.connection.execute(f"SELECT count(*) FROM {table}").fetchone()

    def release(self) -> None:
        self.connection.rollback()
        self.connection.close()


def waiting_ddl(db: str) -> list[tuple]:
    """Sessions waiting for an ACCESS EXCLUSIVE lock in ``db``: the migration queued behind the reader."""
    with psycopg.connect(f"{SERVER}/{db}", autocommit=True) as conn:
        return conn.execute(
            "SELECT l.pid, c.relname, left(a.query, 80) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND l.mode = 'AccessExclusiveLock'"
        ).fetchall()
