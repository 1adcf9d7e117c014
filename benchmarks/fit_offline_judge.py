"""Fit the `semantic` judge on ELITR-Bench dev against GPT-4, and check it on test2 against humans.

Protocol (strict): every fitted number (feature standardisation, weights, intercept) comes from
the dev split's recorded GPT-4 judge scores only, `generated-responses/elitr-bench-qa_dev_st_
gpt-4-eval.json` (QA single-turn, 9 models x 141 questions = 1269 responses, the setting test2's
human scores were collected in). Human (expert "gold", crowd "silver") and Prometheus scores of
`elitr-bench-qa_test2_st_all-eval.json` (3 models x 130 questions = 390) are used only to
report agreement, never to choose anything.

Model: score = 1 + 9 * sigmoid(b + w . z), z = features standardised with dev means/stds,
fit by regularised least squares (scipy.optimize.least_squares, deterministic from w = 0).

    python benchmarks/fit_offline_judge.py [--datasets ../shared/datasets] [--print-constants]

prints the fitted constants (paste them into plugins/judges/semantic.py with --print-constants),
the test2 agreement table (Pearson, Spearman, Kendall over the 390 items), per-model means and
the seconds the judge took on test2.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

DEV_FILE = "elitr-bench-qa_dev_st_gpt-4-eval.json"
TEST_FILE = "elitr-bench-qa_test2_st_all-eval.json"
TARGET = "gpt-4-eval"
#: L2 penalty on the standardised weights (fixed a priori, not tuned on test2)
RIDGE = 1.0
REFERENCES = ("gold-human-eval", "silver-human-eval", "gpt-4-eval", "prometheus-eval")


@dataclass
class Item:
    meeting: str
    question_id: str
    model: str
    question: str
    response: str
    reference: str
    scores: dict[str, float]


def load_items(path: Path) -> list[Item]:
    """Every (question, response) of a generated-responses file, through the replay loader."""
    from lceval_plugins.elitr.replay import RecordedFile, recorded_scores

    recorded = RecordedFile.load(path)
    items = []
    for (meeting, qid), q in recorded.questions.items():
        for r in q["generated-responses"]:
            scores = recorded_scores(r)
            items.append(Item(meeting, qid, str(r["model"]), str(q["question"]),
                              str(r["generated-response"]).strip(), str(q["groundtruth-answer"]),
                              {k: v for k, v in scores.items() if v is not None}))
    return items


def features(items: list[Item]):
    import numpy as np

    from lceval_plugins.judges.semantic import featurize, minilm_encoder

    return np.array(featurize([(i.question, i.response, i.reference) for i in items],
                              minilm_encoder()), dtype=np.float64)


def fit(x, y, ridge: float = RIDGE) -> dict:
    """Standardise with the fit data's statistics, then least squares of the sigmoid model."""
    import numpy as np
    from scipy.optimize import least_squares

    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales < 1e-9] = 1.0
    z = (x - means) / scales
    k = z.shape[1]

    def residuals(p):
        pred = 1.0 + 9.0 / (1.0 + np.exp(-np.clip(p[0] + z @ p[1:], -60, 60)))
        return np.concatenate([pred - y, np.sqrt(ridge) * p[1:]])

    sol = least_squares(residuals, np.zeros(k + 1), method="trf", xtol=1e-12, ftol=1e-12,
                        gtol=1e-12, max_nfev=10000)
    return {"means": [round(float(v), 6) for v in means], "scales": [round(float(v), 6) for v in scales],
            "weights": [round(float(v), 6) for v in sol.x[1:]], "intercept": round(float(sol.x[0]), 6)}


def dev_data(datasets: Path):
    import numpy as np

    items = load_items(datasets / "elitr-bench" / "generated-responses" / DEV_FILE)
    items = [i for i in items if TARGET in i.scores]
    return items, features(items), np.array([i.scores[TARGET] for i in items])


def derive(datasets: Path) -> dict:
    """The constants the judge ships, from the dev file alone."""
    _, x, y = dev_data(datasets)
    return fit(x, y)


def dev_cross_validation(items: list[Item], x, y) -> float:
    """Pearson with GPT-4 of leave-one-meeting-out predictions on dev: how well the model
    generalises to unseen meetings, measured without touching test2."""
    import numpy as np

    from lceval_plugins.judges.semantic import predict

    meetings = np.array([i.meeting for i in items])
    pred = np.zeros_like(y)
    for meeting in sorted(set(meetings)):
        held = meetings == meeting
        p = fit(x[~held], y[~held])
        pred[held] = predict(x[held].tolist(), p["means"], p["scales"], p["weights"], p["intercept"])
    return correlations(pred, y)[0]


def correlations(a, b) -> tuple[float, float, float]:
    from scipy.stats import kendalltau, pearsonr, spearmanr

    return (float(pearsonr(a, b)[0]), float(spearmanr(a, b)[0]), float(kendalltau(a, b)[0]))


def agreement(datasets: Path, params: dict | None = None) -> str:
    """The test2 table: each judge against each recorded score, and per-model means."""
    import numpy as np

    from lceval_plugins.judges.lexical import lexical_score
    from lceval_plugins.judges.semantic import predict

    items = load_items(datasets / "elitr-bench" / "generated-responses" / TEST_FILE)
    start = time.perf_counter()
    x = features(items)
    kw = {} if params is None else {"means": params["means"], "scales": params["scales"],
                                    "weights": params["weights"], "intercept": params["intercept"]}
    semantic = np.array(predict(x.tolist(), **kw))
    seconds = time.perf_counter() - start
    judges = {
        "lexical": np.array([lexical_score(i.response, i.reference)[0] for i in items]),
        "semantic": semantic,
        "GPT-4 (recorded)": np.array([i.scores["gpt-4-eval"] for i in items]),
        "Prometheus (recorded)": np.array([i.scores["prometheus-eval"] for i in items]),
    }
    refs = {name: np.array([i.scores[name] for i in items]) for name in REFERENCES}
    lines = [f"test2 QA single-turn, {len(items)} items (3 models x 130 questions); "
             "Pearson / Spearman / Kendall tau-b", "",
             "| judge | " + " | ".join(REFERENCES) + " |", "|---" * (len(REFERENCES) + 1) + "|"]
    for name, scores in judges.items():
        cells = []
        for ref, gold in refs.items():
            cells.append("-" if np.array_equal(scores, gold) else
                         "{:.2f} / {:.2f} / {:.2f}".format(*correlations(scores, gold)))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    models = sorted({i.model for i in items})
    lines += ["", "| mean score | " + " | ".join(models) + " |", "|---" * (len(models) + 1) + "|"]
    for name, scores in list(judges.items()) + [(n, v) for n, v in refs.items() if "human" in n]:
        means = [scores[[i.model == m for i in items]].mean() for m in models]
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in means) + " |")
    lines += ["", f"semantic judge on test2: {seconds:.1f} s for {len(items)} items (features + "
              f"embeddings, model already loaded; {os.cpu_count()} CPUs, shared)"]
    return "\n".join(lines)


def constants_source(params: dict) -> str:
    def tup(values):
        return "(" + ", ".join(repr(v) for v in values) + ",)"
    return (f"MEANS: tuple[float, ...] = {tup(params['means'])}\n"
            f"SCALES: tuple[float, ...] = {tup(params['scales'])}\n"
            f"WEIGHTS: tuple[float, ...] = {tup(params['weights'])}\n"
            f"INTERCEPT: float = {params['intercept']!r}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "datasets"))
    ap.add_argument("--print-constants", action="store_true")
    args = ap.parse_args()
    datasets = Path(args.datasets)
    from lceval_plugins.judges.semantic import FEATURE_NAMES, minilm_encoder

    minilm_encoder()  # load once, outside the timing
    items, x, y = dev_data(datasets)
    params = fit(x, y)
    print(f"fit on {DEV_FILE} against {TARGET}: {len(items)} responses; leave-one-meeting-out "
          f"Pearson with {TARGET}: {dev_cross_validation(items, x, y):.3f}")
    for name, w in zip(FEATURE_NAMES, params["weights"]):
        print(f"  {name:20s} {w:+.3f}")
    print(f"  {'intercept':20s} {params['intercept']:+.3f}\n")
    if args.print_constants:
        print(constants_source(params))
    print(agreement(datasets, params))


if __name__ == "__main__":
    main()
