"""The SQLite store's file itself: its tables and indexes and what opening it does (``schema``),
the columns a newer runsgate derives for rows an older one wrote (``backfill``), how it gives
space back (``space``), and a consistent copy of it while servers use it (``backup``)."""
