"""armd on Spark Structured Streaming: session, synthetic source, sinks, managed queries, statistics.

Importing this package imports pyspark; the pure core (``costmodel``,
``policies``, ``migrations``) never does. The daemon wires these pieces:
``session.build_session`` → ``managed.QueryManager`` (+ ``NaiveRestartApplier``)
and ``listener.ProgressListener`` → ``listener.SparkStats``.
"""
