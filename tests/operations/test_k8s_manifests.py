"""docs/k8s/: the Kubernetes example of docs/operations.md ("Several servers") parses, and names commands,
options, probes and settings that exist."""

import shlex
from pathlib import Path

import yaml
from django.core.management import get_commands, load_command_class

from statestore_admin.dashboard.checks import check_cache_password
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
    """The container's literal values (a value from a Secret: ``secretKeyRef`` below)."""
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def secret_ref(container: dict, name: str) -> dict:
    """The Secret and key that ``name`` comes from, defined before every value that expands it as $(name)."""
    names = [item["name"] for item in container["env"]]
    (item,) = [item for item in container["env"] if item["name"] == name]
    for later in container["env"][: names.index(name)]:
        assert f"$({name})" not in later.get("value", ""), "Kubernetes expands only variables defined before"
    return item["valueFrom"]["secretKeyRef"]


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
        ("NetworkPolicy", "statestore-redis"),
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
    port = redis["spec"]["ports"][0]["port"]
    assert env["CACHE_URL"] == f"redis://:$(REDIS_PASSWORD)@{redis['metadata']['name']}:{port}/0"
    (redis_container,) = containers(by_kind("Deployment")["statestore-redis"])
    assert secret_ref(container, "REDIS_PASSWORD") == secret_ref(redis_container, "REDIS_PASSWORD")
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


def test_only_the_dashboard_reaches_the_redis_and_only_with_its_password(settings):
    """The cache is shared, so who may write to it is the deployment's business: a password from a Secret
    (Redis requires it, CACHE_URL carries it), a NetworkPolicy that admits the dashboard's pods only, and no
    Service reachable from outside the cluster."""
    redis = by_kind("Deployment")["statestore-redis"]
    (container,) = containers(redis)
    args = container["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    assert secret_ref(container, "REDIS_PASSWORD") == {"name": "statestore-redis", "key": "password"}

    for service in by_kind("Service").values():
        assert service["spec"]["type"] == "ClusterIP"
        assert not service["spec"].get("externalIPs") and all("nodePort" not in p for p in service["spec"]["ports"])

    policy = by_kind("NetworkPolicy")["statestore-redis"]["spec"]
    assert policy["podSelector"]["matchLabels"] == redis["spec"]["template"]["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    web = by_kind("Deployment")["statestore-admin"]
    # A pod selector alone: pods of this namespace, the dashboard's only (no namespaceSelector, no ipBlock).
    assert rule["from"] == [{"podSelector": {"matchLabels": web["spec"]["template"]["metadata"]["labels"]}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": container["ports"][0]["containerPort"]}]
    for job in by_kind("CronJob").values():  # the jobs do not use the cache: nothing to admit
        (job_container,) = containers(job)
        assert "CACHE_URL" not in env_of(job_container)

    # What the dashboard's CACHE_URL becomes once Kubernetes expands it: check --deploy has nothing to say.
    (web_container,) = containers(web)
    settings.CACHES = {"default": {"BACKEND": "statestore_admin.cache.RedisCache", "LOCATION": ""}}
    settings.CACHES["default"]["LOCATION"] = env_of(web_container)["CACHE_URL"].replace("$(REDIS_PASSWORD)", "0f3a")
    assert check_cache_password() == []
