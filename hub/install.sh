#!/usr/bin/env bash
# make hub: install the class's hub (docs/hub.md), as root, from this checkout (one root has reviewed: root runs what
# this installs). Everything lands in root-owned places no other account can write:
#   HUB_ENV (/opt/transformer-hub)   the Python environment every server runs from (requirements.txt and
#                                    hub/requirements.txt, on the system's python3.11), and share/course-hub/ in it: the
#                                    per-role settings, the proxy (npm ci from hub/etc/package-lock.json), the verified
#                                    Tiny Shakespeare, the admin commands
#   HUB_ETC (/etc/transformer-hub)   jupyterhub_config.py and lti_config.py (COURSE_HUB_AUTH=lti); hub.env, the settings, written once
#                                    and never overwritten; proxy.env, the proxy's token (0600), written once
#   /etc/systemd/system/transformer-hub{,-proxy}.service, /etc/profile.d/transformer-hub.sh,
#   /usr/local/sbin/transformer-hub (accounts, backup, restore)
# Debian packages are installed only when missing, never upgraded (apt-get --no-upgrade; python3.11-venv at the installed
# python3.11's own version). A Node.js from elsewhere (NodeSource, nvm) is used as it is when it has npm.
# HUB_ENV_ONLY=1 (make test-hub): only HUB_ENV, nothing in /etc or /usr/local.
# Run again after a change (a new requirements.txt, an update of this checkout): what is current is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
HUB_ENV=${HUB_ENV:-/opt/transformer-hub}
HUB_ETC=${HUB_ETC:-/etc/transformer-hub}
HUB_PYTHON=${HUB_PYTHON:-/usr/bin/python3.11}
SYSTEMD_DIR=${SYSTEMD_DIR:-/etc/systemd/system}
PROFILE_D=${PROFILE_D:-/etc/profile.d}
SBIN=${SBIN:-/usr/local/sbin}
DATA=${DATA:-}
SHARE=$HUB_ENV/share/course-hub
say() { echo "make hub: $*"; }
die() { echo "error: make hub: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs into $HUB_ENV, $HUB_ETC and /etc/systemd)"

# --- Debian packages, only the missing ones, never an upgrade --------------------------------------------------------
missing=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
if [ ! -x "$HUB_PYTHON" ]; then
  missing+=(python3.11)
fi
if ! "$HUB_PYTHON" -c 'import ensurepip' 2>/dev/null; then
  if have python3.11; then  # the venv module at the installed Python's own version: never an upgrade of python3.11
    missing+=("python3.11-venv=$(dpkg-query -W -f='${Version}' python3.11)")
  else
    missing+=(python3.11-venv)
  fi
fi
if command -v node >/dev/null; then
  command -v npm >/dev/null || die "a Node.js is installed ($(command -v node), $(node --version)) without npm: install \
npm from where that Node.js came from (NodeSource's nodejs package includes it; with nvm, nvm install-latest-npm), \
then run make hub again. Debian's npm would conflict with it."
else
  missing+=(nodejs npm)
fi
for p in nginx bubblewrap; do have "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "install ${missing[*]} (no apt-get here), then run make hub again"
  say "apt-get install --no-upgrade ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt="apt-get -o DPkg::Lock::Timeout=900 -y -qq --no-install-recommends --no-upgrade"
  $apt install "${missing[@]}" >/dev/null 2>&1 || { apt-get -qq update >/dev/null && $apt install "${missing[@]}"; } \
    || die "apt-get could not install ${missing[*]} without upgrading what is installed: install them yourself \
(apt-get install ${missing[*]%%=*}), then run make hub again"
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || die "Node.js $(node --version) is too old for configurable-http-proxy 5 (18 or later)"

# --- the shared environment: rebuilt when the requirements change --------------------------------------------------
want=$(cat requirements.txt hub/requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$HUB_ENV/.installed" 2>/dev/null)" != "$want" ]; then
  say "building $HUB_ENV (requirements.txt, hub/requirements.txt; minutes)"
  rm -rf "$HUB_ENV"
  mkdir -p "$HUB_ENV"
  "$HUB_PYTHON" -m venv "$HUB_ENV"
  # torch first, from PyTorch's CPU index (TORCH_INDEX, as the Makefile's install_torch): never a multi-GB CUDA build
  "$HUB_ENV/bin/pip" install --quiet --disable-pip-version-check --no-compile --no-deps --retries 1 \
    --extra-index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" "$(grep -m1 -o '^torch==[^ #]*' requirements.txt)"
  "$HUB_ENV/bin/pip" install --quiet --disable-pip-version-check --no-compile -r requirements.txt -r hub/requirements.txt
  "$HUB_ENV/bin/python" -m compileall -q -j 0 "$HUB_ENV/lib" >/dev/null || true
  echo "$want" > "$HUB_ENV/.installed"
fi
mkdir -p "$SHARE"

# --- the proxy, from npm's lock file, in the share (never a global install) -----------------------------------------
want=$(cat hub/etc/package.json hub/etc/package-lock.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$SHARE/proxy/.installed" 2>/dev/null)" != "$want" ]; then
  say "installing configurable-http-proxy into $SHARE/proxy"
  rm -rf "$SHARE/proxy"
  mkdir -p "$SHARE/proxy"
  cp hub/etc/package.json hub/etc/package-lock.json "$SHARE/proxy/"
  npm ci --prefix "$SHARE/proxy" --no-audit --no-fund --loglevel=error
  echo "$want" > "$SHARE/proxy/.installed"
fi

# --- Tiny Shakespeare, verified, read-only, one copy every server sees ------------------------------------------------
[ -n "$DATA" ] || [ ! -f input.txt ] || DATA=input.txt  # the checkout's own (make data), else DATA, else a download
"$HUB_ENV/bin/python" -m course.authoring.data --dest "$SHARE/input.txt" ${DATA:+--from "$DATA"} >/dev/null

# --- what the servers read: per-role settings, JupyterLab's defaults; the admin commands --------------------------------
rm -rf "$SHARE/roles"
cp -r hub/roles "$SHARE/roles"
mkdir -p "$HUB_ENV/share/jupyter/lab/settings"
cp hub/etc/overrides.json "$HUB_ENV/share/jupyter/lab/settings/overrides.json"  # no news or update prompts in a class
rm -rf "$HUB_ENV/share/jupyter/labextensions/course-hub-feedback"  # "view feedback" opens the page (hub/labextension)
cp -r hub/labextension "$HUB_ENV/share/jupyter/labextensions/course-hub-feedback"
cp hub/admin.py "$SHARE/admin.py"
mkdir -p "$SBIN"
printf '#!/bin/sh\n# the hub'"'"'s admin commands (make hub): accounts, backup, restore; --help says more\nexec %s %s "$@"\n' \
  "$HUB_ENV/bin/python" "$SHARE/admin.py" > "$SBIN/transformer-hub"
chmod 0755 "$SBIN/transformer-hub"
# root's, readable by all, writable by no one else (only what is not so yet: the environment's thousands of files are
# left untouched when they already are)
find "$HUB_ENV" \( ! -user root -o ! -group root \) -exec chown -h root:root {} +
find "$HUB_ENV" ! -type l \( -perm /022 -o ! -perm -004 -o \( -type d ! -perm -001 \) \) -exec chmod u+rwX,go+rX,go-w {} +
chmod 0444 "$SHARE/input.txt"
if [ -n "${HUB_ENV_ONLY:-}" ]; then  # make test-hub: the environment the tests' machine sees; nothing in /etc here
  say "installed $HUB_ENV (only: HUB_ENV_ONLY)"
  exit 0
fi

# --- the hub's configuration, in /etc --------------------------------------------------------------------------------
mkdir -p "$HUB_ETC"
chmod 0755 "$HUB_ETC"
install -m 0644 -o root -g root hub/jupyterhub_config.py "$HUB_ETC/jupyterhub_config.py"
install -m 0644 -o root -g root hub/lti_config.py "$HUB_ETC/lti_config.py"
if [ ! -e "$HUB_ETC/hub.env" ]; then
  install -m 0644 -o root -g root hub/etc/hub.env "$HUB_ETC/hub.env"
  say "wrote $HUB_ETC/hub.env: set COURSE_INSTRUCTOR in it"
fi
if [ ! -e "$HUB_ETC/proxy.env" ]; then
  (umask 077; echo "CONFIGPROXY_AUTH_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$HUB_ETC/proxy.env")
fi
chown root:root "$HUB_ETC/proxy.env"
chmod 0600 "$HUB_ETC/proxy.env"

# --- the services, and the terminal's PATH --------------------------------------------------------------------------
mkdir -p "$SYSTEMD_DIR" "$PROFILE_D"
install -m 0644 -o root -g root hub/etc/transformer-hub.service hub/etc/transformer-hub-proxy.service "$SYSTEMD_DIR/"
install -m 0644 -o root -g root hub/etc/profile.sh "$PROFILE_D/transformer-hub.sh"
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
say "installed: $HUB_ENV, $HUB_ETC, $SYSTEMD_DIR/transformer-hub.service (systemctl enable --now transformer-hub)"
