"""`rlark`, the command-line client of RLark's REST API (SPEC 17, docs/cli.md).

A client of the API only: it imports nothing of Django or the apps (an import-linter contract in
pyproject.toml says so) and holds no rule of its own; parsing, overrides, sweeps and findings
are computed by the server. Modules are imported lazily so that `rlark --help` starts fast.
"""

# The REST API version this client speaks (the server's `X-RLark-API-Version`): another major
# version is refused, another minor one is warned about.
API_VERSION = (1, 0)
UPDATE_COMMAND = "pip install --upgrade rlark  (in a checkout: git pull && pip install -e .)"
