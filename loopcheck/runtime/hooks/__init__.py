"""What the runtime checker observes: one module per thing torch gives no event for (or
gives one that needs registering), each with an ``install()`` that records into the session.
They decide nothing beyond what is cheapest to say on the spot; verdicts live in ``checks``."""
