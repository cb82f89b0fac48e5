#!/usr/bin/env bash
# Install the system libraries scikit-sparse (CHOLMOD) needs, only when they are missing.
# Debian 12 ships SuiteSparse 5.12, against which scikit-sparse 0.4.16 builds (DESIGN §8);
# libopenblas0-pthread makes CHOLMOD's supernodal factorisation 4-7x faster than reference BLAS.
set -euo pipefail
pkgs=(libsuitesparse-dev libopenblas0-pthread)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system deps: present (${pkgs[*]})"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "system deps: apt-get not found; install SuiteSparse headers and OpenBLAS yourself" >&2
  echo "  (see README 'Other ways to install'), or use LATTICE_LGM_NO_GMRF=1 for the pip-only route." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "system deps: missing ${missing[*]} and not root; run as root or use LATTICE_LGM_NO_GMRF=1" >&2
    exit 1
  fi
fi
echo "system deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
