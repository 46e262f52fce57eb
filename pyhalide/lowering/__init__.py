"""Lowering passes, one per module; pyhalide/lower.py runs them in order."""
