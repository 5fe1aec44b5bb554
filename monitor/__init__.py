"""driftloop monitor: GPU exporter, ingestion, drift & performance job, alerts, daemon."""
from monitor.config import DriftloopConfig, load_config
from monitor.errors import DriftloopError

__all__ = ["DriftloopConfig", "DriftloopError", "load_config"]
__version__ = "0.1.0"
