"""What every section shares."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

ENV_PREFIX = "DRIFTLOOP_"
DEFAULT_CONFIG_FILE = "driftloop.yaml"


class _Section(BaseModel):
    # Unknown keys are almost always typos; reject rather than silently ignore them.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
