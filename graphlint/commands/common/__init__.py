"""What several commands share: the options and helpers of `options`, and the static half as
`check`, `baseline` and `gate` run it (`static`)."""
