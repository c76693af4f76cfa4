"""bloomqg: measure how well LLMs write educational questions at a target Bloom level.

All logic of the Snakemake workflow lives here; the rule scripts in ``workflow_scripts/`` only
translate between Snakemake and these functions.
"""

__version__ = "0.1.0"
