"""Analyses over a job's canonical events, up to :func:`build_model`: phases and their attribution,
hidden-gap classification, collective attribution, capabilities, timeline markers, candidates
and the per-rank diagnostics model."""
