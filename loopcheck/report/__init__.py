"""Presenting runtime reports: the HTML page (``html``, ``charts``, ``svg``, ``downsample``), the
terminal summary and charts (``show``, ``terminal_chart``) and the CI formats (``findings`` turns
runtime findings into the static checker's ``Finding`` objects for ``loopcheck.output``).

Nothing here imports torch or libcst at import time; ``data`` reads any report version.
"""
