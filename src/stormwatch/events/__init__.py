"""The canonical events frame: its columns (:mod:`.schema`), one record's rules (:mod:`.values`,
:mod:`.records`, :mod:`.legacy_records`), building and merging frames (:mod:`.frame`,
:mod:`.merge`), sessions and their ids, and collective-communication tokens."""
