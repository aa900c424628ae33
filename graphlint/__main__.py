"""`python -m graphlint` runs the command-line interface."""
from graphlint.cli import main

if __name__ == "__main__":
    main()
