"""The outputs of a batch: each one sink (plan/sink.py), chosen by the registry from the options."""
