"""The formats CI systems and code hosts read: SARIF for code scanning (`sarif`), GitHub
workflow annotations (`github`), GitLab code quality (`gitlab`) and JUnit XML (`junit`)."""
