"""Where graphlint meets its process: exit codes and the one-line failure on bad input
(`exits`), reading source and config files safely (`reading`), and the terminal streams both
halves' progress displays write to (`terminal`)."""
