"""Layer 5: judging runs: statistics of samples, benchmarks of repeated runs, verdicts, comparisons, A/B pairs, and the history of earlier runs."""
