"""run/, sub-layer 2 of 3: what an ended process left, read into a result; imports run/process/, never the attempt loop above it."""
