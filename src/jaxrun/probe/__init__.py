"""The in-child probe: ``python -m jaxrun.probe --events FILE -- script.py [args]`` (jaxrun starts
it as ``python -c ENTRY ...``, probe/arguments.py, which saves every script's process runpy's imports).

It runs a script as ``__main__`` and reports what happened inside it (body time, JIT work,
exceptions, device memory, recorded metrics) as JSON lines on a private channel file, never on
stdout, so the script's own output is untouched. It imports nothing heavy: jax listeners are
attached only when the script itself imports jax.
"""
