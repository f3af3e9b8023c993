"""The default settings of each game family, one YAML file per family (``<family>.yaml``).

Installed as ``selfplay.hyperparams`` (package data of the wheel), so that the defaults come
with the code; :data:`selfplay.config_files.HYPERPARAMS_DIR` points here.
"""
