"""Transcript noise (Thonet et al., 2024b, Sec. 3 and App. A), shared by the task types that
read ELITR-Bench transcripts (`elitr`, `cream`) and by the `noise` plugin's commands: ASR-like
word substitutions learnt from a corpus (`corpus`, `align`, `rules`), injected at a target word
error rate (`inject`, `text`), and `options.noise` of a task type (`transcripts`). No family's
package: each imports this one."""
