"""Provenance: who may write (API keys, roles, tiers) and what a signature proves.

This layer decides a document's tier from its writer's key and any publisher signature, before
the document reaches the knowledge base. It has no HTTP in it on purpose: the service, the CLI
and the evaluation harness all use it, and none of them should have to import the web service
to do so. See :mod:`trishield.provenance.keys` and :mod:`trishield.provenance.signing`.
"""
