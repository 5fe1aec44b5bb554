# syntax=docker/dockerfile:1
# driftloop image: the daemon (`driftloop serve`, the default command), the standalone GPU exporter
# (`driftloop exporter`) and, in docker-compose.yml, the MLflow server (`mlflow server`; the same
# MLflow version as the client, so the two always agree).
#
#   docker build -t driftloop:0.1.0 .
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 -t driftloop:0.1.0-cuda .
#
# NVML (GPU metrics) needs no CUDA in the image: the NVIDIA container toolkit mounts the driver's
# libnvidia-ml into the container when GPUs are reserved for it. The default CPU build of torch keeps
# the image ~1 GB; training on the GPU needs a CUDA build (second command above).

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
# Same pin as pyproject.toml (an unpinned torch pulls a multi-GB CUDA build).
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/driftloop
ENV PATH=/opt/driftloop/bin:$PATH
# torch first, from its own index, so that the project's install finds it satisfied.
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY monitor ./monitor
COPY trainer ./trainer
RUN pip install ".[postgres]"

FROM python:${PYTHON_VERSION}-slim-bookworm
LABEL org.opencontainers.image.title="driftloop" \
      org.opencontainers.image.description="Closed-loop MLOps daemon: GPU exporter, drift monitoring, retraining" \
      org.opencontainers.image.licenses="Apache-2.0"
# libgomp: torch's CPU kernels; tini: signals and zombie reaping for the retrain worker processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/driftloop /opt/driftloop
# Secrets come as files (compose/Docker secrets): SERVER_TOKEN_FILE names the file that holds
# server.token. It is deliberately not a DRIFTLOOP_* variable: those are all configuration keys, and
# `docker compose exec driftloop driftloop ...` (which bypasses this entrypoint) must still start.
COPY --chmod=755 <<'EOF' /usr/local/bin/driftloop-entrypoint
#!/bin/sh
set -eu
if [ -n "${SERVER_TOKEN_FILE:-}" ]; then
  if [ ! -r "$SERVER_TOKEN_FILE" ]; then
    echo "Error: SERVER_TOKEN_FILE=$SERVER_TOKEN_FILE is not a readable file" >&2
    exit 2
  fi
  DRIFTLOOP_SERVER__TOKEN="$(cat "$SERVER_TOKEN_FILE")"
  if [ -z "$DRIFTLOOP_SERVER__TOKEN" ]; then
    echo "Error: SERVER_TOKEN_FILE=$SERVER_TOKEN_FILE is empty" >&2
    exit 2
  fi
  export DRIFTLOOP_SERVER__TOKEN
fi
exec driftloop "$@"
EOF
RUN useradd --system --uid 10001 --home-dir /var/lib/driftloop --create-home driftloop \
 && mkdir -p /mlflow && chown driftloop:driftloop /mlflow
ENV PATH=/opt/driftloop/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DRIFTLOOP_HOME=/var/lib/driftloop \
    DRIFTLOOP_SERVER__HEALTH_PORT=8471 \
    NVIDIA_DRIVER_CAPABILITIES=utility,compute
USER driftloop
WORKDIR /var/lib/driftloop
VOLUME ["/var/lib/driftloop"]
# 8470: driftloop serve; 8471: its liveness port (GET /livez, for an orchestrator's liveness probe);
# 9471: driftloop exporter.
EXPOSE 8470 8471 9471
# Healthy when `driftloop serve` (8470) or `driftloop exporter` (9471) answers /healthz: readiness, which
# compose's depends_on waits for (Docker restarts nothing on it). Liveness probes go to 8471.
# docker-compose.yml gives the MLflow service its own check.
COPY --chmod=755 <<'EOF' /usr/local/bin/driftloop-healthcheck
#!/usr/bin/env python3
import sys
import urllib.request

for port in (8470, 9471):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=4) as r:
            sys.exit(0 if r.status == 200 else 1)
    except OSError:
        continue
sys.exit(1)
EOF
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["driftloop-healthcheck"]
ENTRYPOINT ["tini", "--", "driftloop-entrypoint"]
CMD ["serve"]
