"""The PoisonedRAG benchmark: real poisons in a real Wikipedia KB, every defense side by side.

``trishield eval poisonedrag`` (:func:`run_poisonedrag`) is the entry point; ``attacks`` holds
the attack families, ``conditions`` the provenance settings and the poison-fraction sweep,
``plan`` the matrix, ``defenses`` the defenses compared, ``records`` the resumable answer
checkpoint, ``scoring`` the metrics and ``render`` the HTML.
"""

from trishield.eval.poisonedrag.runner import PoisonedRAGOptions, run_poisonedrag

__all__ = ["PoisonedRAGOptions", "run_poisonedrag"]
