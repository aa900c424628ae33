"""Writers: each renders a finished Report and never analyses anything."""
