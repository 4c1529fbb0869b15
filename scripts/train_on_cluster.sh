#!/usr/bin/env bash
# Run on the head by `ray submit`: train with the cluster's Ray, runs under ~/rlscale/runs.
#   ray submit scripts/cluster.yaml scripts/train_on_cluster.sh pong --batch critical
set -euo pipefail
cd ~/rlscale
export RAY_AUTH_MODE=token
exec .venv/bin/python -m rlscale.train "$@" --address auto
