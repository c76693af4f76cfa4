"""A study in Inspect's formats: each cell as an Inspect evaluation log (:mod:`.export`)."""
