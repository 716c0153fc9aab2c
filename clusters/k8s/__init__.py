"""The Kubernetes gateway: the only package in RLark that imports `kubernetes`.

One keyword-only function per verb, credentials and timeouts passed in,
failures raised as `KubeError` subclasses, transient read failures retried here.
"""

from clusters.k8s.client import DEFAULT_TIMEOUT, Credentials
from clusters.k8s.errors import (
    AlreadyExists,
    BadRequest,
    Invalid,
    KubeError,
    ListTooLarge,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
)
from clusters.k8s.jobs import (
    JOB_API_VERSION,
    JOB_GROUP,
    JOB_KIND,
    JOB_PLURAL,
    JOB_VERSION,
    create_job,
    delete_job,
    get_job,
    list_jobs,
)
from clusters.k8s.kubeconfig import (
    KubeconfigContext,
    KubeconfigError,
    credentials_from_kubeconfig,
    read_context,
)
from clusters.k8s.kueue import (
    list_cluster_queues,
    list_local_queues,
    list_workloads,
    pending_workloads,
)
from clusters.k8s.nodes import NodeInfo, iter_node_pages
from clusters.k8s.pods import (
    DEFAULT_LOG_BYTES,
    LIVE_PODS_SELECTOR,
    BoundPod,
    ContainerState,
    EventInfo,
    PodCondition,
    PodInfo,
    PodLog,
    PodLogReader,
    PodUsage,
    iter_bound_pod_pages,
    iter_pod_usage_pages,
    list_events,
    list_pods,
    read_pod_log,
)
from clusters.k8s.retry import backoff_delays
from clusters.k8s.storage import list_storage_classes

__all__ = [
    "DEFAULT_LOG_BYTES",
    "DEFAULT_TIMEOUT",
    "JOB_API_VERSION",
    "JOB_GROUP",
    "JOB_KIND",
    "JOB_PLURAL",
    "JOB_VERSION",
    "LIVE_PODS_SELECTOR",
    "AlreadyExists",
    "BadRequest",
    "BoundPod",
    "ContainerState",
    "Credentials",
    "EventInfo",
    "Invalid",
    "KubeError",
    "KubeconfigContext",
    "KubeconfigError",
    "ListTooLarge",
    "NodeInfo",
    "NotFound",
    "PodCondition",
    "PodInfo",
    "PodLog",
    "PodLogReader",
    "PodUsage",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "backoff_delays",
    "create_job",
    "credentials_from_kubeconfig",
    "delete_job",
    "get_job",
    "iter_bound_pod_pages",
    "iter_node_pages",
    "iter_pod_usage_pages",
    "list_cluster_queues",
    "list_events",
    "list_jobs",
    "list_local_queues",
    "list_pods",
    "list_storage_classes",
    "list_workloads",
    "pending_workloads",
    "read_context",
    "read_pod_log",
]
