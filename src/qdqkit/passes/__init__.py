"""Graph rewrites, one pass per rule (see each module's docstring for the rule it applies)."""
