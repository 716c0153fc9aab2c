"""Findings + manifest latency for a 3-role and a 20-role job on the demo fleet.

    .venv/bin/python bench/render.py [--rounds 300]

The context (matches, verifications, clusters) is built once from deploy/fleets/demo.yaml
in memory, as `jobs.context` would load it; each round then runs `jobs.core.findings.check`
and `jobs.core.render.build_manifest` (render, YAML, sha256), which is what the wizard's
preview, the API's manifest endpoint and submission do per request. Django's translation
machinery is configured, so messages go through `gettext` as in production. Prints median
and p95 per job; the target is a median under 5 ms for the 3-role job.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import django  # noqa: E402
import yaml  # noqa: E402
from django.conf import settings  # noqa: E402

from jobs.core.findings import check, has_errors  # noqa: E402
from jobs.core.render import build_manifest  # noqa: E402
from jobs.core.spec import EnvVar, JobSpec, Mount, RoleSpec  # noqa: E402
from tests.jobs.fleet_context import clean_context, clean_spec  # noqa: E402


def _configure_django() -> None:
    if not settings.configured:
        settings.configure(USE_I18N=True, LANGUAGE_CODE="en", INSTALLED_APPS=[])
        django.setup()


def _twenty_role_spec() -> JobSpec:
    head = clean_spec().roles[0]
    hosts = [("gpu-a", f"a-node-{i:02d}", "s3-fuse") for i in range(1, 12)]
    hosts += [("gpu-b", f"b-node-{i:02d}", "ceph-rbd") for i in range(1, 9)]
    workers = tuple(
        RoleSpec(
            name=f"Worker{index:02d}",
            cluster=cluster,
            selector=(("kubernetes.io/hostname", host), ("topology.rlinf.io/cluster", cluster)),
            gpus=8,
            devices=(("rlinf.io/rdma", 2),),
            image=head.image,
            prepare_script="source /opt/venv/bin/activate\nexport NCCL_DEBUG=INFO\n",
            env=(EnvVar("HF_HOME", "/mnt/cache"), EnvVar("WORKER", str(index))),
            mounts=(Mount(kind="object_storage", storage_class=storage, target="/mnt/ckpt"),),
        )
        for index, (cluster, host, storage) in enumerate(hosts, start=1)
    )
    return replace(clean_spec(), roles=(head, *workers))


def _time(run: Callable[[], object], rounds: int) -> list[float]:
    run()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _report(label: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    print(f"  {label:<22} median {statistics.median(samples):7.3f} ms   p95 {p95:7.3f} ms")


def _bench(name: str, spec: JobSpec, rounds: int) -> None:
    ctx = clean_context(spec)
    findings = check(spec, ctx)
    assert not has_errors(findings), [f.code for f in findings if f.severity == "error"]
    manifest = build_manifest(spec, ctx)
    workers = manifest.data["spec"]["minAvailable"]
    tasks = len(manifest.data["spec"]["tasks"])
    print(f"{name}: {tasks} tasks, {workers} workers, {len(manifest.yaml):,} bytes of YAML")
    _report("findings", _time(lambda: check(spec, ctx), rounds))
    _report("render + YAML + sha", _time(lambda: build_manifest(spec, ctx), rounds))
    both = _time(lambda: (check(spec, ctx), build_manifest(spec, ctx)), rounds)
    _report("findings + render", both)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    _configure_django()
    print(f"PyYAML {yaml.__version__}, libyaml: {yaml.__with_libyaml__}, rounds: {args.rounds}")
    _bench("3 roles", clean_spec(), args.rounds)
    _bench("20 roles", _twenty_role_spec(), args.rounds)


if __name__ == "__main__":
    main()
