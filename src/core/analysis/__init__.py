"""Comparing what runs produced (public API): paired tests between two runs, agreement
between score sources (judges, people), and ranking systems by pairwise comparison.

- `compare_runs` / `format_comparison` (`lceval compare`), with the paired statistics any
  plugin can reuse: `paired_bootstrap` (cluster bootstrap of paired differences) and
  `paired_permutation_p`; `paired_comparison` runs the whole test over two lists of samples.
- `read_sources`, `merge_sources`, `agreement`, `format_agreement`, `matched_scores`
  (`lceval judge-agreement`).
- `rank`, `RankOptions`, `collect_systems`, `make_pairwise_judge`, `format_ranking`,
  `write_ranking` (`lceval rank`), over Elo, Bradley-Terry and their bootstraps
  (`Match`, `elo_over_orders`, `bradley_terry`, `bootstrap_bradley_terry`), with the pieces a
  plugin that ranks its own way reuses: `bt_log_likelihood`, `clusters_of` (matches grouped
  into resampling units), `head_to_head`, `match_triples` and `score_matrix`, and the steps
  of `rank` (`plan_pairs`, `combine`, `outcome`).
"""

from lceval.analysis._agreement import agreement, format_agreement, matched_scores, merge_sources, read_sources
from lceval.analysis._compare import (PairedComparison, compare_runs, format_comparison, paired_bootstrap,
                                      paired_comparison, paired_permutation_p)
from lceval.analysis._pairwise import (Match, NoMLE, bootstrap_bradley_terry, bootstrap_ci, bradley_terry,
                                       bt_log_likelihood, clusters_of, elo, elo_over_orders, expected_score,
                                       head_to_head, match_triples, score_matrix)
from lceval.analysis._rank import (RankOptions, Ranking, collect_systems, combine, make_pairwise_judge, outcome,
                                   plan_pairs, rank)
from lceval.analysis._rankings import format_ranking, write_ranking

__all__ = [
    "Match", "NoMLE", "PairedComparison", "RankOptions", "Ranking", "agreement", "bootstrap_bradley_terry",
    "bootstrap_ci", "bradley_terry", "bt_log_likelihood", "clusters_of", "collect_systems", "combine", "compare_runs",
    "elo", "elo_over_orders", "expected_score", "format_agreement", "format_comparison", "format_ranking",
    "head_to_head", "make_pairwise_judge", "match_triples", "matched_scores", "merge_sources", "outcome",
    "paired_bootstrap", "paired_comparison", "paired_permutation_p", "plan_pairs", "rank", "read_sources", "score_matrix",
    "write_ranking",
]
