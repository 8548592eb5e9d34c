"""Layer 6: what a batch will run: its jobs in order, resumed or fresh."""
