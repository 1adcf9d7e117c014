"""`lceval judge-agreement`: how far does a judge agree with people (or with another judge)?

An LLM judge is only as useful as its agreement with the people whose judgment it replaces.
ELITR-Bench (Thonet et al., 2024a, App. D.2, Fig. 2) measures it three ways, all reproduced here for
any two or more score sources over the same items:
- item level: Pearson (Fig. 2b), Spearman and Kendall correlations, with bootstrap CIs that
  resample clusters (meetings) because items of one meeting are not independent;
- system level: per-model means per source and whether the sources rank the models alike;
- score levels: for each score bin of a reference source, the distribution of another
  source's scores (Fig. 2a) - which exposes a judge that only separates a few levels.
Sources are run directories (the engine reads them) or recorded-score files (read by
plugins through the `register_score_sources` hook).
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.engine import Plugins
from lceval.results import load_run
from lceval.results import uncensored_score
from lceval.types import ScoredItem, ScoreSource

Key = tuple[str, ...]


# -- reading sources ---------------------------------------------------------------------

def sources_from_run(path: Path, task: str | None) -> list[ScoreSource]:
    run = load_run(path)
    tasks = [task] if task else list(run.results.get("tasks") or {})
    out = []
    for name in tasks:
        if name not in (run.results.get("tasks") or {}):
            raise UserError(f"the run has no task '{name}'", file=path / "results.json", field="--task")
        cluster_by = run.spec(name).report.cluster_by
        judge_id = run.results["tasks"][name].get("judge") or {}
        label = str(judge_id.get("judge", "judge"))
        if judge_id.get("source"):
            label = f"{label}:{judge_id['source']}" if ":" not in label else label
        items = []
        for s in run.task_samples(name):
            if s.response is None:
                continue
            cluster = str(s.metadata.get(cluster_by, s.conv_id)) if cluster_by else s.conv_id
            j = s.judgments[0] if s.judgments else None
            subitems = (j.details.get("subitems") if j is not None else None) or []
            if subitems:  # a judge that scores parts of one answer (e.g. SummHay insights)
                for sub in subitems:
                    score = sub.get("score")
                    items.append(ScoredItem(item_id=f"{s.item_id}/{sub['id']}", system=run.model,
                                            score=None if score is None else float(score), cluster=cluster,
                                            label=None if sub.get("label") is None else str(sub["label"])))
            else:
                items.append(ScoredItem(item_id=s.item_id, system=run.model, score=uncensored_score(s),
                                        cluster=cluster, response=s.response))
        out.append(ScoreSource(name=label, items=items, origin=str(path)))
    return out


def read_sources(arg: str, plugins: Plugins, task: str | None) -> list[ScoreSource]:
    """`[LABEL=]PATH[#SOURCE]`: a run directory or a recorded-score file, optionally one
    named source of it, optionally renamed."""
    label, eq, rest = arg.partition("=")
    if not eq or "/" in label or Path(arg).exists():
        label, rest = "", arg
    path_text, _, pick = rest.partition("#")
    path = Path(path_text).expanduser()
    if not path.exists():
        raise UserError("score source not found", file=path, field="sources")
    if path.is_dir():
        found = sources_from_run(path, task)
    else:
        found = None
        for name, reader in plugins.score_sources.items():
            found = reader(path)
            if found is not None:
                break
        if found is None:
            known = ", ".join(sorted(plugins.score_sources)) or "none"
            raise UserError("no installed reader recognises this file", file=path, field="sources",
                            hint=f"Give a run directory or a recorded-score file (readers: {known}).")
    if pick:
        chosen = [s for s in found if s.name == pick]
        if not chosen:
            raise UserError(f"no score source '{pick}' in it (has: {', '.join(s.name for s in found)})",
                            file=path, field="sources")
        found = chosen
    if label:
        if len(found) != 1:
            raise UserError(f"LABEL= needs exactly one source, this holds {len(found)}: "
                            f"{', '.join(s.name for s in found)}", file=path, field="sources",
                            hint="Pick one with PATH#SOURCE.")
        found[0].name = label
    return found


def merge_sources(sources: list[ScoreSource]) -> list[ScoreSource]:
    """Sources with one name are one scorer: e.g. the same judge's runs on three models."""
    merged: dict[str, ScoreSource] = {}
    for s in sources:
        if s.name in merged:
            merged[s.name].items.extend(s.items)
            merged[s.name].origin += f", {s.origin}"
        else:
            merged[s.name] = ScoreSource(name=s.name, items=list(s.items), origin=s.origin, note=s.note)
    return list(merged.values())


# -- matching ----------------------------------------------------------------------------

def _digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def keyed(source: ScoreSource, by_response: bool) -> dict[Key, ScoredItem]:
    out: dict[Key, ScoredItem] = {}
    seen: dict[Key, int] = defaultdict(int)
    for item in sorted(source.items, key=lambda i: (i.item_id, i.system)):
        base = (item.item_id, _digest(item.response or "")) if by_response else (item.item_id, item.system)
        k = (*base, str(seen[base]))  # two systems giving the same answer stay two items
        seen[base] += 1
        out[k] = item
    return out


def _by_response(sources: list[ScoreSource]) -> bool:
    return all(i.response is not None for s in sources for i in s.items)


def scored_in_both(ka: dict[Key, ScoredItem], kb: dict[Key, ScoredItem]) -> list[Key]:
    """The matched items both sources gave a usable score, in a stable order."""
    return sorted(k for k in set(ka) & set(kb) if ka[k].score is not None and kb[k].score is not None)


def matched_scores(sources: list[ScoreSource], a: str, b: str) -> list[tuple[float, float]]:
    """(score of `a`, score of `b`) for every item both scored, matched as `agreement` does:
    the points of a judge-against-people scatter."""
    by_response = _by_response(sources)
    named = {s.name: s for s in sources}
    ka, kb = keyed(named[a], by_response), keyed(named[b], by_response)
    return [(float(ka[k].score), float(kb[k].score)) for k in scored_in_both(ka, kb)]  # type: ignore[arg-type]


# -- statistics --------------------------------------------------------------------------

def _correlations(x: Any, y: Any) -> dict[str, float | None]:
    import numpy as np
    from scipy import stats

    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return {"pearson": None, "spearman": None, "kendall": None}
    return {"pearson": float(np.corrcoef(x, y)[0, 1]),
            "spearman": float(stats.spearmanr(x, y).statistic),
            "kendall": float(stats.kendalltau(x, y).statistic)}


def item_agreement(a: list[float], b: list[float], clusters: list[str], *, n_boot: int = 1000,
                   level: float = 0.95, seed: int = 0, resample: str = "clusters") -> dict[str, Any]:
    import numpy as np

    x, y = np.asarray(a, float), np.asarray(b, float)
    point = _correlations(x, y)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(clusters if resample == "clusters" else [str(i) for i in range(len(x))]):
        groups[c].append(i)
    index = [np.array(v) for v in groups.values()]
    out: dict[str, Any] = {"n": len(x), "resample": resample, "clusters": len(index), "n_boot": n_boot,
                           "level": level}
    boots: dict[str, list[float]] = defaultdict(list)
    if len(index) >= 2 and point["pearson"] is not None:
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):
            pick = np.concatenate([index[j] for j in rng.integers(0, len(index), len(index))])
            for name, value in _correlations(x[pick], y[pick]).items():
                if value is not None and not math.isnan(value):
                    boots[name].append(value)
    alpha = (1 - level) / 2
    for name, value in point.items():
        vals = boots.get(name)
        out[name] = {"value": value,
                     "ci_low": float(np.quantile(vals, alpha)) if vals else None,
                     "ci_high": float(np.quantile(vals, 1 - alpha)) if vals else None}
    return out


def system_agreement(means: dict[str, dict[str, float]], a: str, b: str) -> dict[str, Any]:
    """Do two sources rank the systems alike? Kendall tau of the per-system means and the
    share of system pairs both order the same way."""
    from scipy import stats

    systems = sorted(set(means[a]) & set(means[b]))
    out: dict[str, Any] = {"systems": len(systems), "kendall": None, "pairs_same_order": None}
    if len(systems) < 2:
        return out
    xa, xb = [means[a][s] for s in systems], [means[b][s] for s in systems]
    pairs = [(i, j) for i in range(len(systems)) for j in range(i + 1, len(systems))]
    same = sum(1 for i, j in pairs if (xa[i] - xa[j]) * (xb[i] - xb[j]) > 0)
    out["pairs_same_order"] = same / len(pairs)
    if len(set(xa)) > 1 and len(set(xb)) > 1:
        out["kendall"] = float(stats.kendalltau(xa, xb).statistic)
    return out


def score_bins(ref: list[float], other: list[float], level: float = 0.95) -> list[dict[str, Any]]:
    """Thonet et al., 2024a, Fig. 2a: per integer bin of the reference score, the other source's mean
    with a t-interval, and its histogram (rounded scores)."""
    import numpy as np
    from scipy import stats

    bins: dict[int, list[float]] = defaultdict(list)
    for r, o in zip(ref, other):
        bins[int(round(r))].append(o)
    out = []
    for b in sorted(bins):
        vals = np.asarray(bins[b], float)
        n = len(vals)
        mean = float(vals.mean())
        half = None
        if n >= 2 and vals.std(ddof=1) > 0:
            half = float(stats.t.ppf(0.5 + level / 2, n - 1) * vals.std(ddof=1) / math.sqrt(n))
        hist: dict[str, int] = defaultdict(int)
        for v in vals:
            hist[str(int(round(v)))] += 1
        out.append({"bin": b, "n": n, "mean": mean,
                    "ci_low": None if half is None else mean - half,
                    "ci_high": None if half is None else mean + half,
                    "histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0])))})
    return out


def agreement(sources: list[ScoreSource], *, bins_of: str | None = None, n_boot: int = 1000,
              seed: int = 0, resample: str = "clusters") -> dict[str, Any]:
    if len(sources) < 2:
        raise UserError(f"judge-agreement needs at least two score sources, got "
                        f"{', '.join(s.name for s in sources) or 'none'}", field="sources",
                        hint="A run directory gives its judge; an ELITR all-eval file gives four.")
    by_response = _by_response(sources)
    keyed_sources = {s.name: keyed(s, by_response) for s in sources}
    names = [s.name for s in sources]
    common = set.intersection(*(set(k) for k in keyed_sources.values()))
    per_source: dict[str, Any] = {}
    means: dict[str, dict[str, float]] = {}
    for s in sources:
        ks = keyed_sources[s.name]
        scored = [i for i in ks.values() if i.score is not None]
        by_sys: dict[str, list[float]] = defaultdict(list)
        for k in common:
            item = ks[k]
            if item.score is not None:
                by_sys[_system_of(keyed_sources, names, k)].append(item.score)
        means[s.name] = {sy: sum(v) / len(v) for sy, v in by_sys.items()}
        per_source[s.name] = {"origin": s.origin, "note": s.note, "items": len(ks), "scored": len(scored),
                              "unscored": len(ks) - len(scored),
                              "system_means": {sy: {"mean": means[s.name][sy], "n": len(v)}
                                               for sy, v in sorted(by_sys.items())}}
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ka, kb = keyed_sources[a], keyed_sources[b]
            both = scored_in_both(ka, kb)
            entry: dict[str, Any] = {"a": a, "b": b, "matched": len(set(ka) & set(kb))}
            entry["item"] = item_agreement([ka[k].score for k in both], [kb[k].score for k in both],
                                           [ka[k].cluster for k in both], n_boot=n_boot, seed=seed,
                                           resample=resample)
            labelled = [k for k in set(ka) & set(kb) if ka[k].label is not None and kb[k].label is not None]
            if labelled:
                entry["label_agreement"] = {"n": len(labelled),
                                            "share": sum(ka[k].label == kb[k].label for k in labelled) / len(labelled)}
            entry["system"] = system_agreement(means, a, b)
            pairs.append(entry)
    ref = bins_of or names[0]
    if ref not in keyed_sources:
        raise UserError(f"--bins-of '{ref}' is not one of the sources ({', '.join(names)})", field="--bins-of")
    bins = {}
    for other in names:
        if other == ref:
            continue
        kr, ko = keyed_sources[ref], keyed_sources[other]
        both = scored_in_both(kr, ko)
        bins[other] = score_bins([kr[k].score for k in both], [ko[k].score for k in both])
    return {"sources": per_source, "matched_by": "item and response text" if by_response else "item and system",
            "items_in_all_sources": len(common), "pairs": pairs, "bins_of": ref, "bins": bins,
            "icc": rater_icc(keyed_sources, names, common)}


def rater_icc(keyed_sources: dict[str, dict[Key, ScoredItem]], names: list[str], common: set[Key]) -> dict[str, Any]:
    """The sources as raters of the items all of them scored: intraclass correlations over
    all items and per cluster, as Thonet et al., 2024b, Table 11 reports its crowd annotators (ICC(2,k)
    per meeting, whose raters are the same; ICC(1,k) over all meetings, whose are not)."""
    from lceval.stats import icc

    keys = sorted(k for k in common if all(keyed_sources[n][k].score is not None for n in names))
    table = [[float(keyed_sources[n][k].score) for n in names] for k in keys]  # type: ignore[arg-type]
    by_cluster: dict[str, list[list[float]]] = defaultdict(list)
    for k, row in zip(keys, table):
        by_cluster[keyed_sources[names[0]][k].cluster].append(row)
    return {"raters": names, "overall": icc(table),
            "by_cluster": {c: icc(rows) for c, rows in sorted(by_cluster.items()) if c}}


def _system_of(keyed_sources: dict[str, dict[Key, ScoredItem]], names: list[str], key: Key) -> str:
    """The system label of a matched item: the shortest any source gives it (a recorded file
    says `GPT-4` where a run says `replay:FILE#GPT-4`)."""
    return min((keyed_sources[n][key].system for n in names), key=lambda label: (len(label), label))


def _f(v: Any, d: int = 2) -> str:
    return "-" if v is None else f"{v:.{d}f}"


def _r(v: Any) -> str:
    """A correlation as the papers print it (three digits: Thonet et al., 2024a, Fig. 2b; Laban et al., 2024, Table 1)."""
    return _f(v, 3)


def _pct(v: Any) -> str:
    """A share as the papers print it (a percentage, one digit: Laban et al., 2024, Table 1)."""
    return "-" if v is None else f"{100 * v:.1f}%"


def format_agreement(rep: dict[str, Any]) -> str:
    out = [f"Items matched by {rep['matched_by']}; {rep['items_in_all_sources']} items are in every source.\n",
           "### Item-level correlation (95% bootstrap CI, resampling "
           f"{rep['pairs'][0]['item']['resample'] if rep['pairs'] else 'clusters'})\n",
           "| A | B | n | Pearson | Spearman | Kendall | same label |", "|---|---|---|---|---|---|---|"]
    for p in rep["pairs"]:
        cells = []
        for name in ("pearson", "spearman", "kendall"):
            c = p["item"][name]
            ci = f" [{_r(c['ci_low'])}, {_r(c['ci_high'])}]" if c["ci_low"] is not None else ""
            cells.append(f"{_r(c['value'])}{ci}")
        lab = p.get("label_agreement")
        out.append(f"| {p['a']} | {p['b']} | {p['item']['n']} | " + " | ".join(cells)
                   + f" | {_pct(lab['share']) + ' (n=' + str(lab['n']) + ')' if lab else '-'} |")
    systems = sorted({sy for s in rep["sources"].values() for sy in s["system_means"]})
    out += ["\n### Mean score per system and source\n",
            "| system | " + " | ".join(rep["sources"]) + " |", "|---|" + "---|" * len(rep["sources"])]
    for sy in systems:
        row = [_f(s["system_means"].get(sy, {}).get("mean")) for s in rep["sources"].values()]
        out.append(f"| {sy} | " + " | ".join(row) + " |")
    out.append("| (unscored items) | " + " | ".join(str(s["unscored"]) for s in rep["sources"].values()) + " |")
    out += ["\n### System-level ranking agreement\n", "| A | B | systems | Kendall | pairs in same order |",
            "|---|---|---|---|---|"]
    for p in rep["pairs"]:
        s = p["system"]
        out.append(f"| {p['a']} | {p['b']} | {s['systems']} | {_r(s['kendall'])} | {_pct(s['pairs_same_order'])} |")
    out += _format_icc(rep.get("icc"))
    for other, rows in rep["bins"].items():
        out += [f"\n### {other} scores within each {rep['bins_of']} score bin (Thonet et al., 2024a, Fig. 2a)\n",
                f"| {rep['bins_of']} bin | n | mean {other} | 95% CI | histogram |", "|---|---|---|---|---|"]
        for r in rows:
            ci = f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" if r["ci_low"] is not None else ""
            hist = " ".join(f"{k}:{v}" for k, v in r["histogram"].items())
            out.append(f"| {r['bin']} | {r['n']} | {_f(r['mean'])} | {ci} | {hist} |")
    return "\n".join(out)


def _format_icc(icc: dict[str, Any] | None) -> list[str]:
    if not icc or icc["overall"]["n"] < 2:
        return []
    out = [f"\n### Intraclass correlation, the {len(icc['raters'])} sources as raters (Thonet et al., 2024b, Table 11)\n",
           "ICC(2,k): the same raters for every item (two-way random, k raters' mean); ICC(1,k): one-way, "
           "for items whose raters differ (Shrout & Fleiss 1979).\n",
           "| items | n | ICC(1,k) | ICC(2,k) | ICC(2,1) |", "|---|---|---|---|---|"]
    for name, block in [*icc["by_cluster"].items(), ("all", icc["overall"])]:
        out.append(f"| {name} | {block['n']} | {_r(block['icc1k'])} | {_r(block['icc2k'])} | {_r(block['icc2'])} |")
    return out
