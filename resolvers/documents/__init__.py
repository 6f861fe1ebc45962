"""What a GraphQL document goes through before and as it runs: its operation named when it has
several (``operation_name``), its fragments ordered once (``fragments``), its cost held to a limit
(``cost``, over the table of ``weights``), its argument values held to their sizes (``limits``),
and the executor that runs it (``executor``)."""
