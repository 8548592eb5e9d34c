"""Layer 0: what every layer shares: constants and validators, formatting, timestamps, the failure table, optional extras, interpreters. Imports nothing of jaxrun above it."""
