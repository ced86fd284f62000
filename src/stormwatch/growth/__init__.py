"""Beyond the reference model: how each rank's memory grows (:mod:`.rank_growth`), how much of
its device it left unused (:mod:`.headroom`).

Pure like the rest of the engine: DataFrames in, frozen dataclasses out. Nothing here changes
``model`` (which keeps equalling stormlog's); results live in model.json's ``fleet`` member.
"""
