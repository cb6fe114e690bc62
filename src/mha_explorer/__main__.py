"""`python -m mha_explorer`: the same command line as `mha-explorer`."""

from .cli import main

main(prog_name="mha-explorer")
