"""Layer 7: one script's run, in three sub-layers: process/ (its process started and watched), reading/ (what it left, read into a result), and here the attempt loop over them."""
