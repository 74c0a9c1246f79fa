"""``python -m llamon_agent`` runs the ``llamon`` command."""

from llamon_agent.cli import main

main()
