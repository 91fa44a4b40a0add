"""``python -m storqos.cli``: the ``storqos`` command."""

from storqos.cli.app import main

main()
