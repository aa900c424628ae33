"""The click commands of `graphlint`, one module per command; `graphlint.cli` assembles them
into the group. Options shared by several commands live in `graphlint.commands.common.options`."""
