"""Inception Score: the reference split protocol, a live estimate, per-image contributions."""
