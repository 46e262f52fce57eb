"""Fitting the cost model's weights to measured schedules: shared by `train` (random pipelines,
offline) and `tune` (one pipeline's measurements, refitted as they come in)."""

from __future__ import annotations

import math

import numpy as np

from .loop_nest import FEATURES


def total_features(models: dict) -> np.ndarray:
    return np.array([sum(m.features[k] for m in models.values()) for k in FEATURES])


def fit_ranking(features: np.ndarray, times: np.ndarray, groups: np.ndarray, start: np.ndarray,
                steps: int = 600, temperature: float = 0.2) -> np.ndarray:
    """Weights (w = exp(theta), so never negative) minimising a pairwise logistic ranking loss over
    schedules of the same pipeline, plus a small squared log-error term that keeps predictions in
    seconds and a pull towards `start` (the prior: rough costs per unit). Adam on numpy."""
    n = len(times)
    pairs_i, pairs_j = [], []
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        for a in idx:
            for b in idx:
                if times[a] < 0.95 * times[b]:  # a is clearly faster than b
                    pairs_i.append(a)
                    pairs_j.append(b)
    pi, pj = np.array(pairs_i, dtype=int), np.array(pairs_j, dtype=int)
    log_t = np.log(times)
    theta0 = np.log(np.maximum(start, 1e-15))
    theta = theta0.copy()
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    lr, b1, b2 = 0.05, 0.9, 0.999
    for step in range(1, steps + 1):
        w = np.exp(theta)
        p = features @ w + 1e-12
        lp = np.log(p)
        dlp = features * w / p[:, None]  # d log p_i / d theta_k
        grad = np.zeros_like(theta)
        if len(pi):
            margin = (lp[pj] - lp[pi]) / temperature
            coef = -1.0 / (1.0 + np.exp(np.clip(margin, -50, 50))) / temperature  # d loss / d margin
            grad += (coef[:, None] * (dlp[pj] - dlp[pi])).mean(axis=0)
        err = lp - log_t
        grad += 0.1 * 2 * (err[:, None] * dlp).mean(axis=0)
        grad += 0.01 * 2 * (theta - theta0) / max(1, n) * 10
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        theta -= lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + 1e-8)
    return np.exp(theta)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    return r


def quality(groups: dict, predict) -> dict:
    """Pairwise ordering accuracy, mean Spearman correlation and mean/max top-pick regret over
    pipelines (groups: seed -> list of (features, time))."""
    correct = total = 0
    spearman, regrets = [], []
    for rows in groups.values():
        if len(rows) < 2:
            continue
        times = np.array([t for _, t in rows])
        pred = np.array([predict(f) for f, _ in rows])
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                if abs(times[i] - times[j]) < 0.05 * min(times[i], times[j]):
                    continue  # within the noise: no order to get right
                total += 1
                correct += (pred[i] < pred[j]) == (times[i] < times[j])
        if len(rows) > 2:
            rt, rp = _ranks(times), _ranks(pred)
            if rt.std() > 0 and rp.std() > 0:
                spearman.append(float(np.corrcoef(rt, rp)[0, 1]))
        regrets.append(float(times[int(np.argmin(pred))] / times.min()))
    return {"pairwise_accuracy": correct / total if total else math.nan, "pairs": total,
            "spearman": float(np.mean(spearman)) if spearman else math.nan,
            "regret_mean": float(np.mean(regrets)) if regrets else math.nan,
            "regret_max": float(np.max(regrets)) if regrets else math.nan}
