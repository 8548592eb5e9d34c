"""Layer 2: what a run leaves behind: the result models, their files and manifest, the results a batch holds, the batch summary, provenance, and every figure declared once."""
