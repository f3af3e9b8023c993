"""The default settings of each game family, one YAML file per family (``<family>.yaml``).

A package only so that the YAML files are installed with ``selfplay`` (a wheel carries them as
package data); :data:`selfplay.config.HYPERPARAMS_DIR` points here.
"""
