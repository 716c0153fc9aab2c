#!/bin/sh
# RLark's container entrypoint: one image, one process per container, chosen by the first
# argument. Every setting comes from the environment (README's configuration table).
#   web      gunicorn serving Django (rlark_site/gunicorn_conf.py: RLARK_WEB_BIND, _WORKERS, ...)
#   worker   a Celery worker consuming $RLARK_WORKER_QUEUES (comma-separated)
#   beat     Celery beat (run exactly one: replicas 1, strategy Recreate)
#   migrate  apply database migrations (the Job run before every rollout)
#   wait-for-migrations  block until no migration is unapplied (init container), bounded
#   manage   any manage.py command, e.g. `manage rotate_credentials`
# Anything else is executed as given (a shell for debugging, for instance).
set -eu

PYTHON="${RLARK_PYTHON:-python}"
cd "${RLARK_APP_DIR:-/app}"

command="${1:-web}"
if [ "$#" -gt 0 ]; then shift; fi

case "$command" in
  web)
    # Bind, workers, threads and timeouts: rlark_site/gunicorn_conf.py (RLARK_WEB_*).
    exec "$PYTHON" -m gunicorn -c python:rlark_site.gunicorn_conf \
      --forwarded-allow-ips "${RLARK_FORWARDED_ALLOW_IPS:-*}" \
      "$@"
    ;;
  worker)
    exec "$PYTHON" -m celery -A rlark_site worker \
      --queues "${RLARK_WORKER_QUEUES:-inventory,submission,status,notifications}" \
      --concurrency "${RLARK_WORKER_CONCURRENCY:-4}" \
      --loglevel "${LOG_LEVEL:-INFO}" \
      --without-gossip --without-mingle \
      "$@"
    ;;
  beat)
    exec "$PYTHON" -m celery -A rlark_site beat \
      --schedule "${RLARK_BEAT_SCHEDULE:-/tmp/celerybeat-schedule}" \
      --loglevel "${LOG_LEVEL:-INFO}" \
      "$@"
    ;;
  migrate)
    exec "$PYTHON" manage.py migrate --no-input "$@"
    ;;
  wait-for-migrations)
    deadline=$(( $(date +%s) + ${RLARK_MIGRATION_WAIT:-600} ))
    until "$PYTHON" manage.py migrate --check --no-input > /dev/null 2>&1; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "entrypoint: migrations still unapplied after ${RLARK_MIGRATION_WAIT:-600}s" >&2
        exit 1
      fi
      echo "entrypoint: waiting for the migration Job" >&2
      sleep "${RLARK_MIGRATION_POLL:-5}"
    done
    ;;
  manage)
    exec "$PYTHON" manage.py "$@"
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
