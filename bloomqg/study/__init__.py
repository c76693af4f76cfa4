"""The study as a whole: its config validated and resolved before any job (``config``), and the
price of its API calls before any call (``study_cost``).
"""
