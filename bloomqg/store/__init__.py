"""The ground floor, which knows no study: what is written and read, and how. The Parquet frame
schemas, provenance, atomic writes and Parquet I/O, the config's JSON schema, job logs, text fit
to store with every secret masked, and bounded readers (JSON of a reply, JSON for HTML, an xlsx
sheet's extent).
"""
