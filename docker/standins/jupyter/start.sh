#!/bin/bash
# STAND-IN start.sh: the part of docker-stacks' start.sh the lab's compose files use.
set -e
echo "start.sh (STAND-IN for the docker-stacks image): $*"
cmd=("$@")
[ ${#cmd[@]} -gt 0 ] || cmd=(bash)
if [ "$(id -u)" = 0 ]; then
  if [ "${NB_UID}" != "$(id -u "${NB_USER}")" ] || [ "${NB_GID}" != "$(id -g "${NB_USER}")" ]; then
    echo "start.sh: ${NB_USER} becomes ${NB_UID}:${NB_GID}"
    groupadd --force --gid "${NB_GID}" --non-unique "${NB_GROUP:-${NB_USER}}"
    usermod --uid "${NB_UID}" --gid "${NB_GID}" --non-unique "${NB_USER}"
  fi
  for dir in ${CHOWN_EXTRA//,/ }; do
    echo "start.sh: chown ${CHOWN_EXTRA_OPTS} ${NB_UID}:${NB_GID} ${dir}"
    # shellcheck disable=SC2086
    chown ${CHOWN_EXTRA_OPTS} "${NB_UID}:${NB_GID}" "${dir}"
  done
  exec setpriv --reuid="${NB_UID}" --regid="${NB_GID}" --init-groups env HOME="/home/${NB_USER}" "${cmd[@]}"
fi
exec "${cmd[@]}"
