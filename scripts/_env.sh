# Sourced by the entry-point scripts: sets up if needed and puts the project's Python first.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# a sourcing script may ask for more (scripts/test: setup_args=--vllm, for the vLLM tests)
bash scripts/setup ${setup_args:-} >&2
if [ -n "${VIRTUAL_ENV:-}" ]; then bin="$VIRTUAL_ENV/bin"; else bin="$root/.venv/bin"; fi
export PATH="$bin:$PATH"
