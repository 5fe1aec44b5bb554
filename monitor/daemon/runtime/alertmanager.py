"""Alertmanager's webhook payload (version 4), validated, and which of its alerts concern us.

Format (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config)::

    {"version": "4", "groupKey": "...", "truncatedAlerts": 0, "status": "firing|resolved",
     "receiver": "...", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
     "externalURL": "...",
     "alerts": [{"status": "firing|resolved", "labels": {}, "annotations": {},
                 "startsAt": "<rfc3339>", "endsAt": "<rfc3339>", "generatorURL": "...",
                 "fingerprint": "..."}]}

An alert concerns the daemon when its labels carry every ``alerts.webhook_match`` pair
(default ``retrain="true"``) and, if it has a ``model`` label, that label is our model.

Every value is bounded (422 naming the field past a limit): the labels, annotations and
summaries end up in incident titles, event rows and logs, and a 5 MiB label once cost 10 s of
server time and a 5 MB event row. The limits (``MAX_*`` below) are far above what Alertmanager
sends in practice.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints, field_validator

MAX_ALERTS = 1000  # alerts per delivery (Alertmanager groups; a larger group is truncated by its max_alerts)
MAX_PAIRS = 64  # labels (or annotations) per alert or group
MAX_NAME_CHARS = 256  # a label or annotation name
MAX_LABEL_CHARS = 1024  # a label value (labels identify an alert: short by nature)
MAX_TEXT_CHARS = 4096  # an annotation value (a summary, a description), a URL, a group key
SUMMARY_CHARS = 300  # one alert's summary in incident titles and event notes

Name = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)]
Labels = Annotated[dict[Name, Annotated[str, StringConstraints(max_length=MAX_LABEL_CHARS)]],
                   Field(max_length=MAX_PAIRS)]
Annotations = Annotated[dict[Name, Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]],
                        Field(max_length=MAX_PAIRS)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]


class _Lenient(BaseModel):
    # Alertmanager adds fields over versions; unknown ones are ignored, known ones validated.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class WebhookAlert(_Lenient):
    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Annotations = Field(default_factory=dict)
    starts_at: datetime | None = Field(None, alias="startsAt")
    ends_at: datetime | None = Field(None, alias="endsAt")
    generator_url: Text | None = Field(None, alias="generatorURL")
    fingerprint: Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] | None = None

    @field_validator("starts_at", "ends_at", mode="before")
    @classmethod
    def _rfc3339(cls, v: object) -> object:
        # pydantic would take a number as epoch seconds; the schema (and Alertmanager) say RFC 3339 text.
        if v is not None and not isinstance(v, (str, datetime)):
            raise ValueError("expected an RFC 3339 time, e.g. 2026-11-30T01:02:03Z")
        return v

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "(unnamed)")

    def summary(self) -> str:
        text = self.annotations.get("summary") or self.annotations.get("description") or ""
        out = f"{self.name}: {text}" if text else self.name
        return out if len(out) <= SUMMARY_CHARS else out[:SUMMARY_CHARS - 3] + "..."


def summarize(alerts: list[WebhookAlert], limit: int = 10) -> str:
    """The first ``limit`` alerts' summaries joined, then how many more: bounded whatever arrives."""
    text = "; ".join(a.summary() for a in alerts[:limit])
    return text + (f"; and {len(alerts) - limit} more" if len(alerts) > limit else "")


class WebhookPayload(_Lenient):
    version: Literal["4"]
    status: Literal["firing", "resolved"]
    alerts: list[WebhookAlert] = Field(max_length=MAX_ALERTS)
    receiver: Text | None = None
    group_key: Text | None = Field(None, alias="groupKey")
    truncated_alerts: StrictInt = Field(0, alias="truncatedAlerts", ge=0)
    group_labels: Labels = Field(default_factory=dict, alias="groupLabels")
    common_labels: Labels = Field(default_factory=dict, alias="commonLabels")
    common_annotations: Annotations = Field(default_factory=dict, alias="commonAnnotations")
    external_url: Text | None = Field(None, alias="externalURL")


@dataclass(frozen=True)
class Selection:
    firing: list[WebhookAlert]
    resolved: list[WebhookAlert]
    ignored: list[WebhookAlert]


def concerns(alert: WebhookAlert, match: dict[str, str], model: str) -> bool:
    if any(alert.labels.get(k) != v for k, v in match.items()):
        return False
    return alert.labels.get("model", model) == model


def select_alerts(payload: WebhookPayload, match: dict[str, str], model: str) -> Selection:
    firing, resolved, ignored = [], [], []
    for alert in payload.alerts:
        if not concerns(alert, match, model):
            ignored.append(alert)
        elif alert.status == "firing":
            firing.append(alert)
        else:
            resolved.append(alert)
    return Selection(firing, resolved, ignored)
