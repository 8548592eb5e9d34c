"""Layer 6: what a batch will run: its jobs in order, resumed or fresh, and the sink protocol every output told of them implements."""
