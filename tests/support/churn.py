"""A churn table as users have them: an id column, int, float, bool and text columns, some values
missing, and a 0/1 target that is not called ``label``. ``shift`` moves the concept (pro-plan
customers start leaving), so a model trained before it loses accuracy after it."""
from __future__ import annotations

import numpy as np
import pandas as pd


def churn_table(n: int, seed: int = 0, shift: float = 0.0, missing: float = 0.05) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    tenure = rng.integers(0, 72, n)
    monthly = rng.normal(70, 20, n)
    senior = age > 65
    plan = rng.choice(["basic", "plus", "pro"], n, p=[0.5, 0.3, 0.2])
    region = rng.choice(["north", "south", "east", "west"], n)
    logit = (-0.05 * tenure + 0.04 * (monthly - 70) + 1.2 * (plan == "basic") + 0.6 * senior + 0.3
             + shift * (3.0 * (plan == "pro") - 2.0 * (plan == "basic")))
    churned = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame = pd.DataFrame({"customer_id": [f"c{seed}-{i:05d}" for i in range(n)], "age": age, "tenure": tenure,
                          "monthly_charges": monthly.round(2), "is_senior": senior, "plan": plan,
                          "region": region, "churned": churned})
    frame.loc[rng.random(n) < missing, "monthly_charges"] = np.nan
    frame.loc[rng.random(n) < missing, "plan"] = None
    return frame
