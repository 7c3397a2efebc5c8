"""Run a test/models script under the Loom Python venv when it needs one.

The Hugging Face and ONNX Runtime scripts (hf_models.py, hf_train.py,
ort_forward.py, selfcheck_hf.py) need `transformers` / `onnxruntime`, which
Debian does not package; scripts/install-python-env.sh puts them in a venv at
${LOOM_VENV:-/opt/loom-venv} on top of Debian's Python. Started with
/usr/bin/python3, such a script re-executes itself with the venv's python;
without the venv it exits 1 with a one-line message naming the install script.
"""
import importlib.util
import os
import sys


def venv_dir():
    return os.environ.get("LOOM_VENV", "/opt/loom-venv")


def require(modules, prog):
    """Make sure every module in `modules` imports; re-exec in the venv if not."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    venv = venv_dir()
    py = os.path.join(venv, "bin", "python")
    in_venv = os.path.realpath(sys.prefix) == os.path.realpath(venv)
    if not in_venv and os.access(py, os.X_OK) and not os.environ.get("_LOOM_VENV_REEXEC"):
        os.environ["_LOOM_VENV_REEXEC"] = "1"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(py, [py, os.path.abspath(sys.argv[0])] + sys.argv[1:])
    raise SystemExit("%s: error: Python module(s) %s not found; run scripts/install-python-env.sh "
                     "(venv %s)" % (prog, ", ".join(missing), venv))
