"""The cost model of paper 001: stream characteristics, operator formulas and plan evaluation.

Pure: numpy and scipy only, no clock, no IO. ``plan.parse_plan`` validates a
plan document, ``evaluate.estimate`` is the readable scalar evaluator and
``batch.BatchPlan`` the vectorised one the policies use; ``measured``
estimates the model's inputs (d, selectivities) from what an engine counted.
"""
