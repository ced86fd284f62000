"""Analyses over canonical events: phase replay, and (later) gaps and collectives."""
