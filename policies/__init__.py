"""Choosing window sizes and granularities within QoS ranges so estimates fit the bounds.

Pure functions of their inputs (time is passed in). ``registry.make_policy``
picks a policy by name; ``admission``, ``triggers``, ``guardrails`` and
``trajectory`` surround it. See docs/policies.md.
"""
