"""The outputs of a batch: each one sink (results/sink.py), chosen by the registry from the options."""
