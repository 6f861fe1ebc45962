"""What every HTTP request of runsgate goes through, whatever its route: request limits
(``limits``), request ids (``request_id``), loopback hosts with authentication off (``hosts``),
no framing (``frames``), answers within their budget in bytes (``encoding``) and the JSON shape of
every refusal (``http_errors``)."""
