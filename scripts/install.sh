#!/usr/bin/env bash
# Install what kernelevolve needs on a fresh Debian/Ubuntu machine, idempotently, into the
# active Python (run it inside a virtualenv: python3 -m venv .venv && . .venv/bin/activate):
# system packages (g++ for load_cpp, bubblewrap for the worker sandbox), then torch pinned
# BEFORE anything else (an unpinned torch, even one pulled in by another package, downloads a
# multi-GB CUDA build), then this package with its triton and share (the Hugging Face kernels
# package, for exported kernels) extras.
#
# --test (or --dev): also what the test suite needs: the `test` extra (pytest, xdist, ruff, the
# LLM clients, Ray) and chromium (only for the test that renders the HTML run report headless,
# so its failure is a warning). .ci/run passes it.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
for arg in "$@"; do
  case "$arg" in
    --test|--dev) tests=1 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown option $arg: use --test (or --dev) to add what the tests need, or nothing" >&2
       exit 2 ;;
  esac
done

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing system packages: ${need[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "warning: please install ${need[*]} with your system's package manager" >&2
  fi
fi

# Debian's `chromium` package; only tests/test_report_html.py needs it (skipped without it).
if [ "$tests" = 1 ] && ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (for the HTML report render test only)"
    { $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; } ||
      echo "warning: chromium not installed; the HTML report render test will be skipped" >&2
  else
    echo "warning: install chromium to run the HTML report render test" >&2
  fi
fi

PY="${PYTHON:-python3}"
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "installing torch 2.13.0 (CPU) and the matching triton 3.7.1"
  "$PY" -m pip install -q "torch==2.13.0" "triton==3.7.1"
fi
extras="triton,share"
[ "$tests" = 1 ] && extras="$extras,test"
"$PY" -m pip install -q -e ".[$extras]"
echo "kernelevolve installed ($extras): $("$PY" -c 'import kernelevolve; print(kernelevolve.__version__)')"
[ "$tests" = 1 ] || echo "to run the tests too: bash scripts/install.sh --test"
