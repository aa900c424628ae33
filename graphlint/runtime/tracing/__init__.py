"""What a traced step did: the interceptor of torch calls and aten ops (`intercept`), the catalogue
of what it flags (`op_catalog`, `kinds`), the lines and functions the step ran (`lines`, `record`),
and the summaries of consecutive steps (`traced_steps`, `hazards`)."""
