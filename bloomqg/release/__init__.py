"""The paper's public release (GitHub ``wmm228/LLM-Eval``) in this workflow's own files.

- :mod:`bloomqg.release.runs`: the manifest of published runs and their import (read, check, build)
- :mod:`bloomqg.release.records`: the typed rows an import builds, checked against the schemas
- :mod:`bloomqg.release.download`: the release at its pinned commit, every file's sha256 checked
- :mod:`bloomqg.release.reliability`: Krippendorff's α and the gate from the published votes
- :mod:`bloomqg.release.tables`: the paper's Tables 4–6 and the auxiliary table, and the paper's
  own figures to compare against
"""
