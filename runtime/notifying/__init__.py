"""A waiting question's notices before its deadline (issue 45): reminders and escalations, each
recorded once (``DeadlineNotifier``), and who is told (``notices_for``)."""
