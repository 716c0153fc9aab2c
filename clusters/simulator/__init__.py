"""The fleet simulator: a local HTTP server speaking the part of the Kubernetes API RLark uses.

Plain Python (stdlib, PyYAML, jsonschema); it neither imports Django nor the
`kubernetes` client. See docs/simulator.md.
"""

from clusters.simulator.core import Simulator
from clusters.simulator.fleet import (
    ClusterSpec,
    Fleet,
    FleetError,
    NodeSpec,
    generate_fleet,
    load_fleet,
    parse_fleet,
)
from clusters.simulator.server import RunningSimulator, start_simulator

__all__ = [
    "ClusterSpec",
    "Fleet",
    "FleetError",
    "NodeSpec",
    "RunningSimulator",
    "Simulator",
    "generate_fleet",
    "load_fleet",
    "parse_fleet",
    "start_simulator",
]
