"""A file as text, before and beside its syntax tree: the source read and decoded as Python
reads it (`source`), its shape measured from the tokens before the parser sees it (`shape`),
and the inline suppressions in its comments (`suppressions`)."""
