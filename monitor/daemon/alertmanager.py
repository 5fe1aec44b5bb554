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
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator


class _Lenient(BaseModel):
    # Alertmanager adds fields over versions; unknown ones are ignored, known ones validated.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class WebhookAlert(_Lenient):
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime | None = Field(None, alias="startsAt")
    ends_at: datetime | None = Field(None, alias="endsAt")
    generator_url: str | None = Field(None, alias="generatorURL")
    fingerprint: str | None = None

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
        return f"{self.name}: {text}" if text else self.name


class WebhookPayload(_Lenient):
    version: Literal["4"]
    status: Literal["firing", "resolved"]
    alerts: list[WebhookAlert] = Field(max_length=10_000)
    receiver: str | None = None
    group_key: str | None = Field(None, alias="groupKey")
    truncated_alerts: StrictInt = Field(0, alias="truncatedAlerts", ge=0)
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")
    common_labels: dict[str, str] = Field(default_factory=dict, alias="commonLabels")
    common_annotations: dict[str, str] = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str | None = Field(None, alias="externalURL")


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
