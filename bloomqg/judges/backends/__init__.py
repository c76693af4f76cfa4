"""One module per judge backend, each defining ``BACKEND = JudgeBackend(...)``.

:func:`bloomqg.judges.registry.judge_backends` imports every module here (but those named
``_*``): a new backend is a new file in this folder. Keep heavy imports (torch,
sentence-transformers) inside the factories, so that listing the backends stays cheap.
"""
