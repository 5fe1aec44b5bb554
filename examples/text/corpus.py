"""The text example's data: a generated corpus of short support messages in four topics, and the
drift it is shown with (nothing is downloaded).

    messages = corpus(500, seed=1)                   # request_id, text, label
    later = corpus(500, seed=2, shift=1.0)           # the same topics in new words

A message is a template sentence filled from its topic's word lists plus shared filler words.
The drift is a *vocabulary shift*: with ``shift`` s, each topic word is replaced, with
probability s, by one of the topic's new words (new product names, new slang) that the training
corpus never had. The topics stay the same and stay learnable from the new words; a model that
knew only the old words loses its way. A few messages (``mixed``, 4 %) mention a second topic's
word too, so no model is perfect. Deterministic given ``seed``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["CLASSES", "TOPICS", "corpus"]

# topic -> (words before the shift, words after it)
TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "billing": (["invoice", "charge", "refund", "payment", "card", "bill", "price", "receipt", "fee", "subscription"],
                ["paywall", "autopay", "chargeback", "wallet", "topup", "credits", "voucher", "plan-tier", "tokens",
                 "cashback"]),
    "delivery": (["parcel", "courier", "shipping", "package", "tracking", "delivery", "box", "address", "van",
                  "postman"],
                 ["locker", "drone", "pickup-point", "click-and-collect", "rider", "same-day", "dropoff", "hub",
                  "doorstep", "e-bike"]),
    "account": (["password", "login", "email", "username", "profile", "account", "security", "verification", "pin",
                 "settings"],
                ["passkey", "2fa", "authenticator", "sso", "biometric", "magic-link", "recovery-code", "device-id",
                 "face-unlock", "otp"]),
    "product": (["screen", "battery", "charger", "cable", "button", "speaker", "camera", "keyboard", "case",
                 "headphones"],
                ["earbuds", "smartwatch", "usb-c", "foldable", "stylus", "tracker", "hub-dock", "powerbank",
                 "soundbar", "webcam"]),
}
CLASSES = sorted(TOPICS)

TEMPLATES = [
    "my {0} is not working and the {1} too",
    "hello i have a question about the {0}",
    "why is the {0} different from the {1} i saw yesterday",
    "please help with my {0} {1} issue",
    "the {0} was wrong again can you check the {1}",
    "{0} problem since last week",
    "is there any news on the {0} and {1}",
    "i want to change the {0}",
]
FILLER = ["please", "thanks", "urgent", "today", "again", "really", "still", "soon", "now", "ok"]


def corpus(n: int, *, seed: int, shift: float = 0.0, mixed: float = 0.04) -> pd.DataFrame:
    """``n`` messages: ``request_id``, ``text``, ``label`` (the topic). ``shift`` in 0..1 is the
    share of topic words drawn from the topic's new words."""
    if not 0.0 <= shift <= 1.0:
        raise ValueError(f"shift must be in 0..1, got {shift}")
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(CLASSES), size=n)
    texts = []
    for k in labels:
        old, new = TOPICS[CLASSES[k]]
        words = [new if rng.uniform() < shift else old for _ in range(2)]
        topic = [w[rng.integers(len(w))] for w in words]
        if rng.uniform() < mixed:  # ... and the other thing: a word of another topic
            other = TOPICS[CLASSES[(k + 1 + rng.integers(len(CLASSES) - 1)) % len(CLASSES)]][0]
            topic[1] = other[rng.integers(len(other))]
        template = TEMPLATES[rng.integers(len(TEMPLATES))]
        extra = " ".join(FILLER[i] for i in rng.choice(len(FILLER), size=rng.integers(0, 3), replace=False))
        texts.append((template.format(*topic) + (" " + extra if extra else "")).strip())
    return pd.DataFrame({"request_id": [f"t{seed}-{i}" for i in range(n)], "text": texts,
                         "label": [CLASSES[k] for k in labels]})
