"""Search engines outside the process that hold a knowledge base's derived search data.

The SQLite store stays the source of truth (provenance, tiers, quarantine, audit); an engine
holds only what search needs, chunk row id -> vector and analysed terms, and can always be
reloaded from the store (:mod:`trishield.kb.indexes.engines.sync`). Engine modules import their
client library only when a backend is constructed, so importing this package needs none of them.
"""
