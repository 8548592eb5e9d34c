"""Layer 3: what is there before anything runs: the scripts of a folder and their names, the devices and their facts, the persistent compilation cache."""
