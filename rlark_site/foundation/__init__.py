"""RLark's site-wide bottom layer: tenancy, audit, the one error type and its API handler, the
one Finding type, request guards, limits, pagination, logging context, metrics and settings
readers. It imports nothing of `jobs`, `clusters` or the project's wiring (`rlark_site.settings`,
`urls`, `views`, ...): every app builds on it (import-linter's layers contract)."""
