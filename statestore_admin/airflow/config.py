"""Airflow's configuration, read the way Airflow 3.3 reads it.

For each option the first of these wins (``airflow/_shared/configuration/parser.py``):

1. the environment variable ``AIRFLOW__{SECTION}__{KEY}``;
2. for sensitive options only (``[database] sql_alchemy_conn``): ``AIRFLOW__{SECTION}__{KEY}_CMD``,
   the output of a command;
3. ``airflow.cfg``: ``$AIRFLOW_CONFIG``, else ``$AIRFLOW_HOME/airflow.cfg`` (``AIRFLOW_HOME`` defaults
   to ``~/airflow``), then its ``{key}_cmd`` for sensitive options;
4. Airflow's default.

Values go through Airflow's ``expand_env_var`` (``$VAR`` and ``~``) and the file through
``configparser``'s basic interpolation (``%%`` is a literal ``%``), as in Airflow. Secrets backends
(``_SECRET`` variants) are not supported: a ``_SECRET`` variable for an option is an error rather than
being ignored silently.

This module must not import Django models: the settings module uses it.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy

METASTORE_BACKEND = "airflow.state.metastore.MetastoreBackend"
# Airflow's own worker-side backend (apache-airflow-providers-common-io): values as objects, rows hold references.
OBJECT_STORAGE_BACKEND = "airflow.providers.common.io.state_store.backend.StateStoreObjectStorageBackend"


class AirflowConfigError(ImproperlyConfigured):
    """An Airflow option has a value Airflow itself would reject, or cannot be read."""


_ENV_REFERENCE = re.compile(r"\$(\w+|\{[^}]*\})")


def expand_env_var(value: str, environ: Mapping[str, str]) -> str:
    """Airflow's ``expand_env_var`` (``$VAR``/``${VAR}`` and ``~`` until nothing changes), against ``environ``."""

    def substitute(match: re.Match) -> str:
        name = match.group(1).strip("{}")
        return environ.get(name, match.group(0))

    while True:
        expanded = _ENV_REFERENCE.sub(substitute, value)
        if expanded.startswith("~") and (expanded == "~" or expanded.startswith("~/")):
            expanded = environ.get("HOME", os.path.expanduser("~")) + expanded[1:]
        if expanded == value:
            return expanded
        value = expanded


def _parse_bool(raw: str) -> bool:
    value = raw.lower().strip()
    if "#" in value:
        value = value.split("#")[0].strip()
    if value in ("t", "true", "1"):
        return True
    if value in ("f", "false", "0"):
        return False
    raise ValueError("must be a boolean (true/false, t/f, 1/0)")


def _parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        pass
    try:  # Airflow's getint also takes "30.0"
        as_float = float(raw)
        if as_float == int(as_float):
            return int(as_float)
    except (ValueError, OverflowError):
        pass
    raise ValueError("must be a whole number")


def _non_negative_int(what: str) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            number = _parse_int(raw)
        except ValueError:
            raise ValueError(f"must be a whole number of {what}, 0 or more") from None
        if number < 0:
            raise ValueError(f"must be a whole number of {what}, 0 or more")
        return number

    return parse


def _dotted_path(raw: str) -> str:
    value = raw.strip()
    parts = value.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ValueError("must be the dotted path of a class, such as package.module.ClassName")
    return value


def _optional_dotted_path(raw: str) -> str:
    return _dotted_path(raw) if raw.strip() else ""


def _text(raw: str) -> str:
    return raw.strip()


@dataclass(frozen=True)
class Option:
    section: str
    key: str
    default: str | None
    parse: Callable[[str], Any]
    help: str  # a lazy translation: shown on the overview in the reader's language
    sensitive: bool = False

    @property
    def env_var(self) -> str:
        # As Airflow names it: a dot in the section becomes an underscore ([common.io] → AIRFLOW__COMMON_IO__…).
        return f"AIRFLOW__{self.section.replace('.', '_').upper()}__{self.key.upper()}"

    @property
    def name(self) -> str:
        return f"[{self.section}] {self.key}"


OPTIONS: dict[tuple[str, str], Option] = {
    (o.section, o.key): o
    for o in (
        Option(
            "state_store",
            "backend",
            METASTORE_BACKEND,
            _dotted_path,
            gettext_lazy("Server-side backend class; only the metastore backend keeps state in these tables."),
        ),
        Option(
            "state_store",
            "default_retention_days",
            "30",
            _non_negative_int("days"),
            gettext_lazy("Days until a task key written without explicit retention expires; 0 = no expiry."),
        ),
        Option(
            "state_store",
            "clear_on_success",
            "False",
            _parse_bool,
            gettext_lazy("Delete all task keys of a task instance when it succeeds."),
        ),
        Option(
            "state_store",
            "state_cleanup_batch_size",
            "0",
            _non_negative_int("rows"),
            gettext_lazy("Rows deleted per batch by garbage collection; 0 = all at once."),
        ),
        Option(
            "state_store",
            "max_value_storage_bytes",
            "65535",
            _non_negative_int("bytes"),
            gettext_lazy("Longest JSON text of one value accepted through the API; 0 = no limit."),
        ),
        Option(
            "workers",
            "state_store_backend",
            "",
            _optional_dotted_path,
            gettext_lazy("Worker-side backend; when set, database values are references to external storage."),
        ),
        Option(
            "common.io",
            "state_store_objectstorage_path",
            "",
            _text,
            gettext_lazy(
                "Base path of the objects of common.io's worker-side backend (file://, s3://conn_id@bucket/…)."
            ),
        ),
        Option(
            "common.io",
            "state_store_objectstorage_threshold",
            "0",
            _non_negative_int("bytes"),
            gettext_lazy(
                "common.io's worker-side backend keeps values whose JSON is shorter than this inline in the row."
            ),
        ),
        Option(
            "common.io",
            "state_store_objectstorage_compression",
            "",
            _text,
            gettext_lazy(
                "Compression of common.io's worker-side objects (an fsspec name such as gzip); adds its suffix."
            ),
        ),
        Option(
            "api",
            "base_url",
            "",
            _text,
            gettext_lazy("The address of Airflow's API server and UI; the dashboard links its pages to the UI's."),
        ),
        Option(
            "database",
            "sql_alchemy_conn",
            None,
            _text,
            gettext_lazy("The Airflow metadata database."),
            sensitive=True,
        ),
    )
}

STATE_STORE_OPTIONS = [
    ("state_store", "backend"),
    ("state_store", "default_retention_days"),
    ("state_store", "clear_on_success"),
    ("state_store", "state_cleanup_batch_size"),
    ("state_store", "max_value_storage_bytes"),
    ("workers", "state_store_backend"),
]


@dataclass(frozen=True)
class ConfigValue:
    option: Option
    value: Any
    raw: str | None
    source: str

    @property
    def name(self) -> str:
        return self.option.name


def _run_command(command: str, what: str) -> str:
    try:
        result = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise AirflowConfigError(f"Cannot run the command given by {what}: {exc}") from exc
    if result.returncode != 0:
        raise AirflowConfigError(
            f"The command given by {what} exited with status {result.returncode}: {result.stderr.strip()}"
        )
    return result.stdout.strip()


class AirflowConfig:
    """Reads Airflow options from an environment mapping and ``airflow.cfg``.

    ``environ`` defaults to ``os.environ``; tests pass their own mapping.
    """

    def __init__(self, environ: Mapping[str, str] | None = None):
        self.environ = os.environ if environ is None else environ
        self._parser: configparser.ConfigParser | None = None
        self._values: dict[tuple[str, str], ConfigValue | AirflowConfigError] = {}

    @property
    def config_path(self) -> Path:
        explicit = self.environ.get("AIRFLOW_CONFIG")
        if explicit is not None:
            return Path(self._expand(explicit))
        home = self._expand(self.environ.get("AIRFLOW_HOME", "~/airflow"))
        return Path(home) / "airflow.cfg"

    def _expand(self, value: str) -> str:
        return expand_env_var(value, self.environ)

    @property
    def parser(self) -> configparser.ConfigParser:
        if self._parser is None:
            parser = configparser.ConfigParser()
            path = self.config_path
            if path.is_file():
                try:
                    parser.read(path, encoding="utf-8")
                except (configparser.Error, UnicodeDecodeError) as exc:
                    raise AirflowConfigError(f"Cannot read Airflow's configuration file {path}: {exc}") from exc
            self._parser = parser
        return self._parser

    def _lookup(self, option: Option) -> tuple[str | None, str]:
        env_var = option.env_var
        if env_var in self.environ:
            return self._expand(self.environ[env_var]), f"environment variable {env_var}"
        if option.sensitive and f"{env_var}_CMD" in self.environ:
            return _run_command(self.environ[f"{env_var}_CMD"], f"{env_var}_CMD"), f"command in {env_var}_CMD"
        if option.sensitive and f"{env_var}_SECRET" in self.environ:
            raise AirflowConfigError(
                f"{option.name} is set through {env_var}_SECRET (a secrets backend), which statestore-admin "
                "cannot read. Set AIRFLOW_DATABASE_URL for the dashboard instead."
            )
        path = self.config_path
        try:
            if self.parser.has_option(option.section, option.key):
                return self._expand(self.parser.get(option.section, option.key)), str(path)
            cmd_key = f"{option.key}_cmd"
            if option.sensitive and self.parser.has_option(option.section, cmd_key):
                command = self.parser.get(option.section, cmd_key)
                return _run_command(command, f"{cmd_key} in {path}"), f"command {cmd_key} in {path}"
        except configparser.Error as exc:
            raise AirflowConfigError(f"Cannot read {option.name} from {path}: {exc}") from exc
        if option.sensitive and self.parser.has_option(option.section, f"{option.key}_secret"):
            raise AirflowConfigError(
                f"{option.name} is set through {option.key}_secret in {path} (a secrets backend), which "
                "statestore-admin cannot read. Set AIRFLOW_DATABASE_URL for the dashboard instead."
            )
        return option.default, "default"

    def get(self, section: str, key: str) -> ConfigValue:
        """The option's value and where it came from (read once per instance: ``_CMD`` commands run once)."""
        found = self._values.get((section, key))
        if found is None:
            try:
                found = self._read(section, key)
            except AirflowConfigError as exc:
                found = exc
            self._values[(section, key)] = found
        if isinstance(found, AirflowConfigError):
            raise found
        return found

    def _read(self, section: str, key: str) -> ConfigValue:
        option = OPTIONS[(section, key)]
        raw, source = self._lookup(option)
        if raw is None:
            return ConfigValue(option, None, None, source)
        try:
            value = option.parse(raw)
        except ValueError as exc:
            shown = "(hidden)" if option.sensitive else repr(raw)
            raise AirflowConfigError(f"Invalid value {shown} for {option.name} (from {source}): {exc}.") from None
        return ConfigValue(option, value, raw, source)

    def state_store_values(self) -> list[ConfigValue]:
        return [self.get(section, key) for section, key in STATE_STORE_OPTIONS]

    def errors(self) -> list[str]:
        """Every option that cannot be read or parsed, as a message naming it and its source."""
        messages = []
        for section, key in OPTIONS:
            try:
                self.get(section, key)
            except AirflowConfigError as exc:
                messages.append(str(exc))
        return messages

    # Typed accessors for the options the domain uses.
    @property
    def backend(self) -> str:
        return self.get("state_store", "backend").value

    @property
    def default_retention_days(self) -> int:
        return self.get("state_store", "default_retention_days").value

    @property
    def clear_on_success(self) -> bool:
        return self.get("state_store", "clear_on_success").value

    @property
    def state_cleanup_batch_size(self) -> int:
        return self.get("state_store", "state_cleanup_batch_size").value

    @property
    def max_value_storage_bytes(self) -> int:
        return self.get("state_store", "max_value_storage_bytes").value

    @property
    def worker_backend(self) -> str:
        return self.get("workers", "state_store_backend").value

    @property
    def objectstorage_path(self) -> str:
        return self.get("common.io", "state_store_objectstorage_path").value

    @property
    def objectstorage_threshold(self) -> int:
        return self.get("common.io", "state_store_objectstorage_threshold").value

    @property
    def objectstorage_compression(self) -> str:
        return self.get("common.io", "state_store_objectstorage_compression").value

    @property
    def api_base_url(self) -> str:
        return self.get("api", "base_url").value

    @property
    def sql_alchemy_conn(self) -> ConfigValue:
        return self.get("database", "sql_alchemy_conn")


_cache: tuple[tuple, AirflowConfig] | None = None
_cache_lock = threading.Lock()


def airflow_config() -> AirflowConfig:
    """The process's Airflow configuration, read once and kept until an ``AIRFLOW*`` environment variable
    or the configuration file (its modification time) changes. Every reader in the project uses this."""
    global _cache
    config = AirflowConfig()
    path = config.config_path
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = None
    key = (tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AIRFLOW"))), str(path), mtime)
    with _cache_lock:
        if _cache is None or _cache[0] != key:
            _cache = (key, config)
        return _cache[1]
