"""The HTTP service: authenticated writers, signed provenance, metrics and the trace viewer."""
