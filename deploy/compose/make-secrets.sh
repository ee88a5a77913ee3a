#!/usr/bin/env sh
# Writes deploy/compose/.env: fresh random keys and tokens for the compose stack (compose reads
# .env beside compose.yaml). Never overwrites an existing .env: the bidder's notice key and the
# Redis password must stay what they were while the volumes live.
set -eu
cd "$(dirname "$0")"
if [ -e .env ]; then
  echo ".env exists; remove it (and docker compose down -v) to start over" >&2
  exit 1
fi
umask 077
key() { openssl rand -hex 32; }
{
  echo "GAVEL_ADMIN_TOKEN=$(key)"
  echo "GAVEL_NOTICE_KEY=$(key)"
  echo "GAVEL_SELLER_PUB_A=$(key)"
  echo "GAVEL_STORE_KEY=$(key)"
  echo "REDIS_PASSWORD=$(key)"
} > .env
echo "wrote $(pwd)/.env (mode 600); the seller key for requests: GAVEL_SELLER_PUB_A"
