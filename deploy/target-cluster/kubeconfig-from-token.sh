#!/bin/sh
# Print a kubeconfig for RLark's ServiceAccount in the current kubectl context's cluster,
# ready to upload on RLark's "Add a cluster from a kubeconfig" page (or the API).
#   kubectl apply -k deploy/target-cluster
#   sh deploy/target-cluster/kubeconfig-from-token.sh gpu-a > gpu-a.kubeconfig
set -eu
name="${1:?usage: kubeconfig-from-token.sh CLUSTER-NAME [NAMESPACE]}"
namespace="${2:-rlark-jobs}"
server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
token="$(kubectl -n "$namespace" get secret rlark-token -o jsonpath='{.data.token}' | base64 -d)"
ca="$(kubectl -n "$namespace" get secret rlark-token -o jsonpath='{.data.ca\.crt}')"
cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: ${name}
    cluster:
      server: ${server}
      certificate-authority-data: ${ca}
users:
  - name: rlark
    user:
      token: ${token}
contexts:
  - name: ${name}
    context:
      cluster: ${name}
      user: rlark
      namespace: ${namespace}
current-context: ${name}
KUBECONFIG
