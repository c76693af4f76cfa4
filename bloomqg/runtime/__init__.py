"""A rule script's start and the processes around it: its log and GPUs (``job``, ``devices``), the
run lock, sharding, and the model servers a job owns (``serving``).
"""
