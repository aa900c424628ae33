"""What a traced step did: the interceptor of torch calls and aten ops (`intercept`, `residence`,
`sync_names`), what it flags (`op_catalog`, `kinds`), the lines and functions run (`lines`,
`record`), and the summaries of consecutive steps (`traced_steps`, `hazards`)."""
