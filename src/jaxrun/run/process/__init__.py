"""run/, sub-layer 1 of 3: a script's process started and watched to its end; imports nothing of run/ above it."""
