"""Writers: each renders a finished Report and never analyses anything. `output` writes the
chosen format; the formats CI systems read are in `ci/`, the text of the runtime sections in
`sections/`."""
