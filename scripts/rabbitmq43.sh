#!/usr/bin/env bash
# scripts/rabbitmq.sh for RabbitMQ 4.3 (Debian forky's rabbitmq-server in a
# Debian forky chroot, every deprecated feature denied): the same commands,
# its state in <state>/rabbitmq43 and its env in <state>/rabbitmq43/env.
# The chroot is <repo>/.tmp/forky unless ACEMQ_FORKY_ROOT names another.
ACEMQ_RABBITMQ_VERSION=4.3 exec "$(dirname "${BASH_SOURCE[0]}")/rabbitmq.sh" "$@"
