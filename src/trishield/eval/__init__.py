"""Evaluation data and helpers: the policy safety suite and the policy QA slice."""
