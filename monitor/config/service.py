"""The service sections: ``logging``, ``exporter``, ``server``, ``store``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from monitor.config.base import _Section


class LoggingConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO",
                                                                description="DEBUG, INFO, WARNING or ERROR (also "
                                                                            "--log-level)")
    format: Literal["text", "json"] = Field("text", description="text, or json (one JSON object per line)")

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        """``info`` as ``--log-level info`` takes it (a YAML file and DRIFTLOOP_LOGGING__LEVEL too)."""
        return value.strip().upper() if isinstance(value, str) else value


class ExporterConfig(_Section):
    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 or :: for Prometheus on another host)")
    # 9400 is dcgm-exporter's, 9100 node_exporter's, 9835 nvidia_gpu_exporter's.
    port: int = Field(9471, ge=1, le=65535, description="port to listen on (dcgm-exporter uses 9400 and "
                                                        "nvidia_gpu_exporter 9835: they can run side by side)")
    simulate: int = Field(0, ge=0, le=1024, description="simulate N GPUs instead of reading NVML")
    tls_cert: Path | None = Field(None, description="certificate file: serve HTTPS (TLS 1.2+); give tls_cert and "
                                                    "tls_key together")
    tls_key: Path | None = Field(None, description="private key file of tls_cert")
    process_metrics: bool = Field(False, description="export device memory per process")
    pcie_throughput: bool = Field(False, description="on GPUs without GPM (before Hopper), also read PCIe rx/tx bytes "
                                                     "per second with NVML's older counter, which samples each "
                                                     "direction for ~20 ms (in the background sampler); GPM GPUs "
                                                     "export it always")
    sampler_interval_seconds: float = Field(5.0, gt=0, description="how often the background sampler reads the slow "
                                                                   "readings (energy, GPM activity, PCIe/NVLink "
                                                                   "throughput and counters, remapped rows, MIG "
                                                                   "instances); GPM ratios are averages over this "
                                                                   "interval. pcie_interval_seconds is the old name, "
                                                                   "still accepted")
    hostname: str | None = Field(None, description="value of the hostname label on every GPU series (published as "
                                                   "dcgm-exporter's Hostname by the dcgm recording rules); default "
                                                   "this machine's host name (set it to the node name in Kubernetes); "
                                                   "an empty string leaves the label out")
    xid_events: bool = Field(False, description="count XID errors from NVML events (background thread)")
    call_timeout_seconds: float = Field(2.0, gt=0, description="bound on one NVML sweep inside a scrape")
    init_retry_initial_seconds: float = Field(1.0, gt=0, description="first retry delay when NVML is unavailable or a "
                                                                     "GPU is lost")
    init_retry_max_seconds: float = Field(60.0, gt=0, description="retry delays double up to this")

    @model_validator(mode="before")
    @classmethod
    def _old_interval_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "pcie_interval_seconds" in data:
            data = dict(data)
            old = data.pop("pcie_interval_seconds")
            data.setdefault("sampler_interval_seconds", old)
        return data

    @model_validator(mode="after")
    def _tls_pair(self) -> "ExporterConfig":
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        return self


MIN_TOKEN_LENGTH = 12


class ServerConfig(_Section):
    host: str = Field("127.0.0.1", description="address driftloop serve listens on")
    port: int = Field(8470, ge=1, le=65535, description="port driftloop serve listens on")
    token: str | None = Field(None, description="bearer token required on write endpoints when set; at least "
                              f"{MIN_TOKEN_LENGTH} characters. Checked from the headers before any "
                              "body byte is read")
    token_file: Path | None = Field(None, description="file holding the token (e.g. a mounted secret), read at "
                                                      "start-up; surrounding whitespace is stripped; not with token")
    protect_reads: bool = Field(False, description="with server.token: every read endpoint needs the token too "
                                "(/v1/status, /v1/schema, /metrics, /docs, /openapi.json), all but /livez, "
                                "/readyz and /healthz, which then tell failure kinds only, and the alerts' "
                                "/runbooks/ (opened from a browser; nothing of the host). Off: reads are "
                                "open, and a caller without the token is told kinds and counts, never a path, "
                                "mount point, URL or error text")
    max_body_bytes: int = Field(32 * 1024 * 1024, gt=0, description="largest request body (compressed or not) "
                                "and largest decompressed body; bigger ones get 413")
    max_batch_records: int = Field(100_000, gt=0, description="most records per request; more get 413")
    max_inflight_bodies: int = Field(8, ge=1, description="request bodies received at once; more get 503 with "
                                     "Retry-After. Bounds body memory to this x max_body_bytes")
    body_timeout_seconds: float = Field(30.0, gt=0, description="time a request body may take to arrive whole; "
                                        "a slower sender gets 408 (slow-loris protection)")
    header_timeout_seconds: float = Field(10.0, gt=0, description="time a connection has to deliver a request's "
                                          "line and headers whole (from connecting, or from the previous response "
                                          "plus server.idle_timeout_seconds); then it is closed (408 when part of "
                                          "them came). Slow-header protection, which uvicorn alone lacks")
    idle_timeout_seconds: float = Field(5.0, gt=0, description="a keep-alive connection with no new request "
                                        "for this long is closed")
    max_connections: int = Field(512, ge=8, description="open connections at most; one more closes the oldest "
                                 "connection quiet for a second or more while waiting for a request head, or "
                                 "else is answered 503 + Retry-After (never cut). serve raises its open-file limit "
                                 "to the hard limit and warns when this does not fit well below it")
    health_port: int | None = Field(None, ge=1, le=65535, description="port of a liveness listener of its own on "
                                    "server.host: GET /livez answered by a small child process that request load, "
                                    "the connection cap and the daemon's GIL cannot hold up (200 while the daemon's "
                                    "event loop runs, 503 once it has not for server.health_stall_seconds, no "
                                    "answer once the daemon is gone). Point liveness probes here; unset: none")
    health_stall_seconds: float = Field(30.0, gt=0, description="the liveness listener answers 503 when the "
                                        "daemon's event loop has not run for this long (hung, not busy: a burst "
                                        "of large bodies stalls it for seconds)")
    gpu_metrics: bool = Field(True, description="serve the GPU collector's series on the daemon's /metrics too "
                                                "(--no-gpu turns it off)")
    leader_lease_seconds: float = Field(10.0, gt=0, description="several daemons on one PostgreSQL store: one "
                                        "leader runs the scheduler, alert policy and retrains; a follower takes "
                                        "over within 2 x this after the leader dies or loses its connection")

    @model_validator(mode="before")
    @classmethod
    def _token_from_file(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("token_file") in (None, ""):
            return data
        if data.get("token") not in (None, ""):
            raise ValueError("give server.token or server.token_file, not both")
        path = Path(data["token_file"])
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"server.token_file {str(path)!r}: cannot read: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        if not token:
            raise ValueError(f"server.token_file {str(path)!r} is empty")
        return {**data, "token": token}

    @field_validator("token")
    @classmethod
    def _usable_token(cls, v: str | None) -> str | None:
        # A blank or one-space token was accepted before and locked every writer out.
        if v is None:
            return v
        if not v.strip():
            raise ValueError("the token is blank; unset it to turn authentication off")
        if v != v.strip():
            raise ValueError("the token starts or ends with whitespace, which an Authorization header cannot carry")
        if len(v) < MIN_TOKEN_LENGTH:
            raise ValueError(f"the token has {len(v)} characters; use at least {MIN_TOKEN_LENGTH} "
                             "(e.g. `openssl rand -hex 24`)")
        if not v.isascii() or not v.isprintable():
            raise ValueError("the token must be printable ASCII")
        return v

    @model_validator(mode="after")
    def _health_port_of_its_own(self) -> "ServerConfig":
        if self.health_port is not None and self.health_port == self.port:
            raise ValueError(f"health_port {self.health_port} is the API's port; give the liveness listener another")
        if self.protect_reads and not self.token:
            raise ValueError("protect_reads needs server.token (or token_file): without a token there is nothing "
                             "to protect the reads with")
        return self


class StoreConfig(_Section):
    url: str | None = Field(None, description="SQLAlchemy URL; default sqlite file under home")
    retention_days: float | None = Field(30.0, gt=0, description="rows received longer ago than this many days "
                                         "are deleted by the daemon (from arrival, not ts: backfills are kept); "
                                         "null keeps all")
    busy_timeout_seconds: float = Field(30.0, gt=0, description="SQLite: how long a writer waits for the lock "
                                        "(and how long /readyz waits before calling a locked store not ready)")
    request_wait_seconds: float = Field(0.5, gt=0, description="how long a store call made for an HTTP request "
                                        "waits for a lock (this process's other writers and SQLite's write lock "
                                        "together) before the request is answered 503 + Retry-After; background "
                                        "jobs wait store.busy_timeout_seconds")
    min_free_bytes: int = Field(64 * 1024 * 1024, ge=0, description="SQLite: free space the store's filesystem "
                                "needs; below it ingestion answers 503 (nothing stored), /readyz is 503 and "
                                "driftloop_store_writable 0. 0 turns the check off")
    # FULL syncs the WAL on every commit (one fsync per batch): a power cut loses no acknowledged batch.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = Field("FULL", description="FULL fsyncs the WAL per batch (no "
                                                                              "acknowledged batch lost to a power "
                                                                              "cut); NORMAL is faster")

    @field_validator("url")
    @classmethod
    def _database_url(cls, url: str | None) -> str | None:
        if url is None:
            return url
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ValueError("expected a database URL: sqlite:////path/to/driftloop.db or "
                             "postgresql+psycopg://user@host/db (or leave store.url out: a file under home)") from None
        if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
            raise ValueError("an in-memory SQLite store loses every acknowledged row when the process exits: give a "
                             "file (sqlite:////var/lib/driftloop/driftloop.db), or leave store.url out (a file under "
                             "home)")
        return url
