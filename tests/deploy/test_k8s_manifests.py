"""deploy/k8s/: the Kubernetes deployment of the image (docs/container.md, "Kubernetes"), rendered as `kubectl apply -k`
renders it: every object valid for a current Kubernetes, the commands, options, probes and settings ones that exist,
the pods locked down, and a static security check (checkov) with nothing to report. No cluster needed."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.core.management import get_commands, load_command_class

from statestore_admin.dashboard.checks import check_cache_password
from tests.operations.test_production import ROOT

K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
AIRFLOW_HELM = K8S / "airflow-helm"
# The Kubernetes releases whose schemas the objects are validated against (kubernetes-validate ships them): the
# first with every field used here generally available (podFailurePolicy: 1.31) and the latest it knows.
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")
IMAGE_USER = 50000  # the Containerfile's USER
# Files, kubectl and checkov only: the same in every pass of the suite (tests/conftest.py).
pytestmark = pytest.mark.any_database


def kustomize(directory: Path) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        message = "kubectl is missing: it renders the manifests (kubectl kustomize)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    rendered = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return kustomize(BASE)


@pytest.fixture(scope="module")
def airflow_helm() -> list[dict]:
    return kustomize(AIRFLOW_HELM)


def by_kind(documents: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == kind}


def pod_spec(workload: dict) -> dict:
    spec = workload["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if workload["kind"] == "CronJob" else spec["template"]
    return template


def containers(workload: dict) -> list[dict]:
    return pod_spec(workload)["spec"]["containers"]


def workloads(documents: list[dict]) -> list[dict]:
    return [doc for doc in documents if doc["kind"] in ("Deployment", "Job", "CronJob")]


def of_the_image(documents: list[dict]) -> list[dict]:
    """The workloads that run the dashboard's image (all but Redis)."""
    return [w for w in workloads(documents) if containers(w)[0]["image"].endswith("/statestore-admin:1.0.0")]


def env_of(container: dict) -> dict[str, str]:
    """The container's literal values (a value from a Secret: ``secret_ref`` below)."""
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def secret_ref(container: dict, name: str) -> dict:
    """The Secret and key that ``name`` comes from, defined before every value that expands it as $(name)."""
    names = [item["name"] for item in container["env"]]
    (item,) = [item for item in container["env"] if item["name"] == name]
    for later in container["env"][: names.index(name)]:
        assert f"$({name})" not in later.get("value", ""), "Kubernetes expands only variables defined before"
    return item["valueFrom"]["secretKeyRef"]


def assert_valid_manage_py(argv: list[str]):
    """``manage.py NAME OPTIONS`` (the image's wrapper on its PATH): a command of ours, options its parser accepts."""
    assert argv[0] == "manage.py", argv
    name, options = argv[1], argv[2:]
    app = get_commands()[name]
    load_command_class(app, name).create_parser("manage.py", name).parse_args(options)  # exits on a bad option


def test_the_manifests_hold_the_deployment(base):
    kinds = sorted((doc["kind"], doc["metadata"]["name"]) for doc in base)
    assert kinds == [
        ("CronJob", "statestore-gc"),
        ("CronJob", "statestore-stats"),
        ("Deployment", "statestore-admin"),
        ("Deployment", "statestore-redis"),
        ("Job", "statestore-migrate"),
        ("Namespace", "statestore"),
        ("NetworkPolicy", "statestore-admin"),
        ("NetworkPolicy", "statestore-jobs"),
        ("NetworkPolicy", "statestore-redis"),
        ("Secret", "statestore-admin-env"),
        ("Secret", "statestore-redis"),
        ("Service", "statestore-admin"),
        ("Service", "statestore-redis"),
        ("ServiceAccount", "statestore-admin"),
    ]
    assert {doc["metadata"].get("namespace") for doc in base if doc["kind"] != "Namespace"} == {"statestore"}


def test_the_web_replicas_serve_with_the_image_and_are_probed_as_the_readme_says(base):
    web = by_kind(base, "Deployment")["statestore-admin"]
    assert web["spec"]["replicas"] == 2
    (container,) = containers(web)
    # The image's own command: gunicorn as the main process, which SIGTERM reaches; no migration at start.
    assert "command" not in container and "args" not in container
    assert pod_spec(web)["spec"]["terminationGracePeriodSeconds"] > 30  # GUNICORN_GRACEFUL_TIMEOUT's default

    env = env_of(container)
    redis = by_kind(base, "Service")["statestore-redis"]
    port = redis["spec"]["ports"][0]["port"]
    assert env["CACHE_URL"] == f"redis://:$(REDIS_PASSWORD)@{redis['metadata']['name']}:{port}/0"
    (redis_container,) = containers(by_kind(base, "Deployment")["statestore-redis"])
    assert secret_ref(container, "REDIS_PASSWORD") == secret_ref(redis_container, "REDIS_PASSWORD")
    assert env["HOST"] == "0.0.0.0" and int(env["PORT"]) == container["ports"][0]["containerPort"] == 8080
    hosts = env["ALLOWED_HOSTS"].split(",")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        check = container[probe]
        assert check["httpGet"]["path"] == path
        assert {h["name"]: h["value"] for h in check["httpGet"]["httpHeaders"]}["Host"] in hosts  # else 400
        assert check["timeoutSeconds"] >= 3  # /readyz gives each database 2 s
    assert container["resources"]["requests"] and container["resources"]["limits"]
    service = by_kind(base, "Service")["statestore-admin"]
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]


def test_the_secrets_hold_what_the_dashboard_reads_from_them(base):
    secret = by_kind(base, "Secret")["statestore-admin-env"]
    assert set(secret["stringData"]) == {"SECRET_KEY", "DATABASE_URL", "AIRFLOW_DATABASE_URL", "OIDC_CLIENT_SECRET"}
    assert secret["stringData"]["SECRET_KEY"] == ""  # to fill in: nothing starts with the example as it is
    for workload in of_the_image(base):
        (container,) = containers(workload)
        assert container["envFrom"] == [{"secretRef": {"name": "statestore-admin-env"}}]


def test_migrations_are_a_job_of_their_own(base):
    (container,) = containers(by_kind(base, "Job")["statestore-migrate"])
    assert container["args"] == ["manage.py", "migrate", "--noinput"]
    assert_valid_manage_py(container["args"])


def test_one_gc_and_one_stats_job_for_the_whole_deployment_with_gc_exit_codes_mapped(base):
    jobs = by_kind(base, "CronJob")
    commands = {}
    for job in jobs.values():
        assert job["spec"]["concurrencyPolicy"] == "Forbid"
        (container,) = containers(job)
        assert_valid_manage_py(container["args"])
        commands[container["args"][1]] = container["args"]
    assert set(commands) == {"state_store_clean", "state_store_stats"}
    assert "--no-stats" in commands["state_store_clean"]  # the hourly stats job takes the snapshots

    # docs/gc.md's exit codes: those a retry would repeat (2, 4) and "another run holds the lock" (3) end the Job.
    gc_doc = (ROOT / "docs" / "gc.md").read_text()
    table = gc_doc[gc_doc.index("### Exit codes") :].split("\n\n")[1]
    documented = {int(code) for code in re.findall(r"^\| (\d) \|", table, re.M)}
    assert documented == {0, 1, 2, 3, 4}
    gc = jobs["statestore-gc"]["spec"]["jobTemplate"]["spec"]
    rules = gc["podFailurePolicy"]["rules"]
    fail = [rule["onExitCodes"] for rule in rules if rule["action"] == "FailJob"]
    assert fail == [{"containerName": "gc", "operator": "In", "values": [2, 3, 4]}]
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules
    assert gc["backoffLimit"] >= 1  # 1, a database error, is retried
    assert pod_spec(jobs["statestore-gc"])["spec"]["restartPolicy"] == "Never"  # podFailurePolicy needs it


def test_every_pod_is_locked_down(base):
    """Non-root, read-only root, no privilege escalation, no capabilities, the runtime's seccomp profile, no
    service account token; the image's containers as its own user, with /tmp their only writable path."""
    for workload in workloads(base):
        spec = pod_spec(workload)["spec"]
        name = workload["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            assert container["securityContext"] == {
                "runAsNonRoot": True,
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, name
            assert container["resources"]["requests"] and container["resources"]["limits"]["memory"], name
    for workload in of_the_image(base):
        spec = pod_spec(workload)["spec"]
        assert (spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]) == (IMAGE_USER, 0)
        (container,) = spec["containers"]
        assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
        assert "emptyDir" in {v["name"]: v for v in spec["volumes"]}["tmp"]


def test_every_pod_has_a_network_policy(base):
    policies = by_kind(base, "NetworkPolicy").values()
    for workload in workloads(base):
        labels = pod_spec(workload)["metadata"]["labels"]
        selecting = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
        assert selecting, workload["metadata"]["name"]
    web = by_kind(base, "NetworkPolicy")["statestore-admin"]["spec"]
    assert web["policyTypes"] == ["Ingress", "Egress"]
    assert web["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8080}]}]


def test_the_redis_keeps_nothing_on_disk(base):
    (container,) = containers(by_kind(base, "Deployment")["statestore-redis"])
    args = container["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"


def test_only_the_dashboard_reaches_the_redis_and_only_with_its_password(base, settings):
    """The cache is shared, so who may write to it is the deployment's business: a password from a Secret
    (Redis requires it, CACHE_URL carries it), a NetworkPolicy that admits the dashboard's pods only, and no
    Service reachable from outside the cluster."""
    redis = by_kind(base, "Deployment")["statestore-redis"]
    (container,) = containers(redis)
    args = container["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    assert secret_ref(container, "REDIS_PASSWORD") == {"name": "statestore-redis", "key": "password"}

    for service in by_kind(base, "Service").values():
        assert service["spec"]["type"] == "ClusterIP"
        assert not service["spec"].get("externalIPs") and all("nodePort" not in p for p in service["spec"]["ports"])

    policy = by_kind(base, "NetworkPolicy")["statestore-redis"]["spec"]
    assert policy["podSelector"]["matchLabels"] == redis["spec"]["template"]["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    web = by_kind(base, "Deployment")["statestore-admin"]
    # A pod selector alone: pods of this namespace, the dashboard's only (no namespaceSelector, no ipBlock).
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app": "statestore-admin"}}}]
    assert {"app": "statestore-admin"}.items() <= web["spec"]["template"]["metadata"]["labels"].items()
    assert rule["ports"] == [{"protocol": "TCP", "port": container["ports"][0]["containerPort"]}]
    for job in by_kind(base, "CronJob").values():  # the jobs do not use the cache: nothing to admit
        (job_container,) = containers(job)
        assert "CACHE_URL" not in env_of(job_container)
        assert job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["app"] != "statestore-admin"

    # What the dashboard's CACHE_URL becomes once Kubernetes expands it: check --deploy has nothing to say.
    (web_container,) = containers(web)
    settings.CACHES = {"default": {"BACKEND": "statestore_admin.cache.RedisCache", "LOCATION": ""}}
    settings.CACHES["default"]["LOCATION"] = env_of(web_container)["CACHE_URL"].replace("$(REDIS_PASSWORD)", "0f3a")
    assert check_cache_password() == []


def test_the_airflow_helm_overlay_reads_airflow_s_database_from_the_chart_s_secret(airflow_helm):
    """The official chart's metadata Secret, ``<release>-airflow-metadata``, key ``connection``: in every container
    of the image, in Airflow's namespace, and no longer in statestore-admin-env."""
    chart_secret = {"name": "airflow-airflow-metadata", "key": "connection"}
    for workload in of_the_image(airflow_helm):
        (container,) = containers(workload)
        assert secret_ref(container, "AIRFLOW_DATABASE_URL") == chart_secret
    assert len(of_the_image(airflow_helm)) == 4
    assert "AIRFLOW_DATABASE_URL" not in by_kind(airflow_helm, "Secret")["statestore-admin-env"]["stringData"]
    assert {doc["metadata"]["namespace"] for doc in airflow_helm} == {"airflow"}
    assert "Namespace" not in {doc["kind"] for doc in airflow_helm}


@pytest.mark.parametrize("directory", [BASE, AIRFLOW_HELM], ids=["base", "airflow-helm"])
def test_every_object_is_valid_for_kubernetes(directory):
    for version in KUBERNETES_VERSIONS:
        for document in kustomize(directory):
            kubernetes_validate.validate(document, version, strict=True)  # raises on an invalid object


# What checkov may report: checks of LOW severity (Prisma Cloud's catalogue; checkov itself gives none offline).
LOW = {
    # The image's tag is in kustomization.yaml (`images:`), Redis's in redis.yaml: a digest is the operator's
    # choice of release, pinned there (`digest:`) once it is pushed to their registry.
    "CKV_K8S_43": "Image should use digest",
}


def checkov_command() -> str | None:
    """checkov from its own virtualenv (make install-dev; requirements-checkov.txt), or from the PATH."""
    version = re.search(r"^checkov==(\S+)", (ROOT / "requirements-checkov.txt").read_text(), re.M).group(1)
    cached = Path.home() / ".cache" / "statestore-admin" / f"checkov-{version}" / "bin" / "checkov"
    return str(cached) if cached.exists() else shutil.which("checkov")


@pytest.mark.parametrize("directory", [BASE, AIRFLOW_HELM], ids=["base", "airflow-helm"])
def test_checkov_reports_nothing_above_low(directory, tmp_path):
    """checkov's Kubernetes checks on the rendered objects: every one passes, is of LOW severity (above), or is
    skipped by an annotation that says why (secrets as environment variables: the image reads its configuration
    from the environment alone)."""
    checkov = checkov_command()
    if not checkov:
        message = "checkov is missing: make install-dev builds its virtualenv (requirements-checkov.txt)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(kustomize(directory)))
    result = subprocess.run(
        [checkov, "--compact", "--framework", "kubernetes", "--output", "json", "-f", str(rendered)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    report = json.loads(result.stdout)
    failed = {(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]}
    assert {check for check, _ in failed} <= set(LOW), sorted(failed)
    skipped = {c["check_id"] for c in report["results"]["skipped_checks"]}
    assert skipped == {"CKV_K8S_35"}, skipped  # secrets as environment variables, said in each annotation
    assert report["summary"]["passed"] > 100
