"""The pure core of a job: what a draft is (spec), every rule about it (findings), and what it
renders to (render, startscript), with the parsers they use (images, sshkeys; quantities are
`clusters.quantities`).

Nothing here reads or writes the database: `jobs.context` loads a `CheckContext` and a
`JobSpec` from the models, and these modules compute over them. An import-linter contract
(pyproject.toml) keeps `django.db` and every models module out of this package.
"""
