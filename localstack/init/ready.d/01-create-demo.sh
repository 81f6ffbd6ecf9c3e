#!/bin/bash
# LocalStack READY hook: create the demo stream `demo-orders` (2 shards) and
# wait until it is ACTIVE, so `docker compose up --wait` returns a usable stream.
# Idempotent: a stream that already exists is left as is.
set -euo pipefail

# awslocal needs credentials; "test" maps to LocalStack's account 000000000000.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

STREAM="${DEMO_STREAM:-demo-orders}"
SHARDS="${DEMO_SHARDS:-2}"
DEADLINE=$((SECONDS + 60))

status() {
  awslocal kinesis describe-stream-summary --stream-name "$STREAM" \
    --query 'StreamDescriptionSummary.StreamStatus' --output text 2>/dev/null || true
}

if [ -z "$(status)" ]; then
  echo "creating Kinesis stream $STREAM with $SHARDS shards"
  awslocal kinesis create-stream --stream-name "$STREAM" --shard-count "$SHARDS"
fi

# Poll (the CLI's stream-exists waiter sleeps 10 s between checks).
until [ "$(status)" = "ACTIVE" ]; do
  if [ "$SECONDS" -ge "$DEADLINE" ]; then
    echo "stream $STREAM not ACTIVE after 60 s (status: $(status))" >&2
    exit 1
  fi
  sleep 0.5
done
echo "Kinesis stream $STREAM is ACTIVE"
