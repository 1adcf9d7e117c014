"""The haystack builder the synthetic families configure (issue 40): one package, no family's.

A synthetic family (niah, ruler, nolima, needlebench, counting_stars) builds each sample from
the same parts, and sets them as its authors do:

- `tokens`: lengths in the evaluated model's own tokens (`model_tokens`), or in GPT-4's where
  the authors count every model's lengths in it (`encoder_for`);
- `texts`: the text of a haystack (the user's essays, the ELITR-Bench transcripts, JSON
  records) and its sentences;
- `units`: a haystack of units measured in tokens (noise blocks, essay sentences, distractor
  lines), fitted to a length, needles between units (RULER);
- `depths` and `needles`: the depth grids, the point a depth names, one needle at a depth
  (moved back after a sentence's end or not), several at their depths, a chain of them;
- `lengths`: lengths as the authors name them, each a split (`--split 32K`);
- `heatmap`: the authors' depth (or star) x length heatmap in `lceval report`.

BABILong's haystacks are built by its authors (the Hub rows hold them): its task type reads
them and builds none. A family package imports this one, never another family's."""
