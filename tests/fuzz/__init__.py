"""Mutation fuzzing of the engine over stormlog-written artifacts (issue 7, point 1)."""
