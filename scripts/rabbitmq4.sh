#!/usr/bin/env bash
# scripts/rabbitmq.sh for RabbitMQ 4.0 (Debian 13's rabbitmq-server in a
# Debian 13 chroot, every deprecated feature denied): the same commands, its
# state in <state>/rabbitmq4 and its env in <state>/rabbitmq4/env. The
# chroot is <repo>/.tmp/debian13 unless ACEMQ_DEBIAN13_ROOT names another.
ACEMQ_RABBITMQ_VERSION=4.0 exec "$(dirname "${BASH_SOURCE[0]}")/rabbitmq.sh" "$@"
