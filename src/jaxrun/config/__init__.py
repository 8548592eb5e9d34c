"""Layer 4: the options of a run, declared once (option_spec), and the settings that fill them from flags, JAXRUN_* variables, script headers and config files; the executor backends by name."""
