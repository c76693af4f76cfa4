"""Tools that document the package: the config page's table (``config_docs``) and the drawing of the
imports (``import_graph``).
"""
