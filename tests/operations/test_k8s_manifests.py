"""docs/k8s/: the Kubernetes example of docs/operations.md ("Several servers") parses, and names commands,
options, probes and settings that exist."""

import shlex
from pathlib import Path

import yaml
from django.core.management import get_commands, load_command_class

from tests.operations.test_production import ROOT

K8S = ROOT / "docs" / "k8s"


def manifests() -> list[dict]:
    documents = []
    for path in sorted(Path(K8S).glob("*.yaml")):
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents


def by_kind(kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in manifests() if doc["kind"] == kind}


def containers(workload: dict) -> list[dict]:
    spec = workload["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if workload["kind"] == "CronJob" else spec["template"]
    return template["spec"]["containers"]


def env_of(container: dict) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def assert_valid_manage_py(argv: list[str]):
    """``python manage.py NAME OPTIONS``: a command of ours, and options its parser accepts."""
    assert argv[:2] == ["python", "manage.py"], argv
    name, options = argv[2], argv[3:]
    app = get_commands()[name]
    load_command_class(app, name).create_parser("manage.py", name).parse_args(options)  # exits on a bad option


def test_the_manifests_parse_and_hold_the_deployment():
    kinds = sorted((doc["kind"], doc["metadata"]["name"]) for doc in manifests())
    assert kinds == [
        ("CronJob", "statestore-gc"),
        ("CronJob", "statestore-stats"),
        ("Deployment", "statestore-admin"),
        ("Deployment", "statestore-redis"),
        ("Service", "statestore-admin"),
        ("Service", "statestore-redis"),
    ]


def test_the_web_replicas_share_the_cache_and_are_probed_as_the_readme_says():
    web = by_kind("Deployment")["statestore-admin"]
    assert web["spec"]["replicas"] > 1
    (container,) = containers(web)
    command = container["command"][-1]
    steps = [shlex.split(step) for step in command.split("&&")]
    assert steps[-1] == ["exec", "gunicorn", "--config", "gunicorn.conf.py"]
    for step in steps[:-1]:
        assert_valid_manage_py(step)
    assert {step[2] for step in steps[:-1]} == {"migrate", "collectstatic"}

    env = env_of(container)
    redis = by_kind("Service")["statestore-redis"]
    assert env["CACHE_URL"] == f"redis://{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}/0"
    assert env["HOST"] == "0.0.0.0" and int(env["PORT"]) == container["ports"][0]["containerPort"]
    hosts = env["ALLOWED_HOSTS"].split(",")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        check = container[probe]
        assert check["httpGet"]["path"] == path
        assert {h["name"]: h["value"] for h in check["httpGet"]["httpHeaders"]}["Host"] in hosts  # else 400
        assert check["timeoutSeconds"] >= 3  # /readyz gives each database 2 s
    assert container["envFrom"] == [{"secretRef": {"name": "statestore-admin-env"}}]
    service = by_kind("Service")["statestore-admin"]
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]


def test_one_gc_and_one_stats_job_for_the_whole_deployment():
    jobs = by_kind("CronJob")
    commands = {}
    for job in jobs.values():
        assert job["spec"]["concurrencyPolicy"] == "Forbid"
        (container,) = containers(job)
        assert_valid_manage_py(container["command"])
        assert container["envFrom"] == [{"secretRef": {"name": "statestore-admin-env"}}]
        commands[container["command"][2]] = container["command"]
    assert set(commands) == {"state_store_clean", "state_store_stats"}
    assert "--no-stats" in commands["state_store_clean"]  # the hourly stats job takes the snapshots


def test_the_redis_keeps_nothing_on_disk():
    (container,) = containers(by_kind("Deployment")["statestore-redis"])
    args = container["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
