"""Where jobs run: one module per backend, each implementing executors/base.py's protocol; executors/backends.py declares them."""
