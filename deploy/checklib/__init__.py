"""deploy/check.py's checks, one module per kind of file: Kubernetes manifests, the compose
file, the systemd units, the Dockerfile, and the Gavel configurations all of them carry."""
