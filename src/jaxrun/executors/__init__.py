"""Layer 8: where jobs run: one module per backend, each implementing executors/base.py's protocol; config/backends.py names them."""
