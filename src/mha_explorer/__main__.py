"""`python -m mha_explorer`: the same command line as `mha-explorer`."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="mha-explorer")
