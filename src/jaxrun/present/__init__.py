"""Layer 9: what people read: the view of a run computed once, the sinks that write each output, and the HTML report."""
