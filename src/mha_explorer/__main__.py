"""`python -m mha_explorer`: the same command line as `mha-explorer`."""

from .cli import run

if __name__ == "__main__":
    run()
